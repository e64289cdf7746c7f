package compat

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const (
	adminUser     = "Administrator"
	adminPassword = "password"
	bucketName    = "default"

	defaultKVPort    = 11210
	defaultMgmtPort  = 8091
	defaultQueryPort = 8093

	readyTimeout = 120 * time.Second
	stopTimeout  = 15 * time.Second
)

// The session's server and the administrator's SDK handles on it, set up once by TestMain.
var (
	srv        *setteeServer
	cluster    *gocb.Cluster
	bucket     *gocb.Bucket
	collection *gocb.Collection
)

// setteeServer is one running `settee server` process with its own ports and data directory.
type setteeServer struct {
	kvPort, mgmtPort, queryPort int
	// The TLS ports; 0 keeps each off, so parallel suites never fight over 11207/18091/18093.
	kvTLSPort, mgmtTLSPort, queryTLSPort int
	bucket                               string
	// host is the loopback address the node binds ("127.0.0.1" unless a cluster test gives each node its own);
	// extraArgs are appended to the command line (e.g. --join).
	host      string
	extraArgs []string
	dir       string
	logPath   string
	cmd       *exec.Cmd
	logFile   *os.File
	exited    chan struct{}
	exitErr   error
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func setteeBinary() string {
	if bin := os.Getenv("SETTEE_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(repoRoot(), "target", "debug", "settee")
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago; every listener is held until all
// ports are known so that the same port is not handed out twice.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func useDefaultPorts() bool {
	v := strings.ToLower(os.Getenv("SETTEE_COMPAT_DEFAULT_PORTS"))
	return v != "" && v != "0" && v != "false" && v != "no"
}

// newServer prepares (but does not start) a server on free ports, or on Couchbase's default ports.
func newServer(bucketName string, defaultPorts bool) (*setteeServer, error) {
	dir, err := os.MkdirTemp("", "settee-compat-go-")
	if err != nil {
		return nil, err
	}
	s := &setteeServer{bucket: bucketName, dir: dir, logPath: filepath.Join(dir, "settee.log"), host: "127.0.0.1"}
	if defaultPorts {
		s.kvPort, s.mgmtPort, s.queryPort = defaultKVPort, defaultMgmtPort, defaultQueryPort
	} else {
		ports, err := freePorts(3)
		if err != nil {
			return nil, err
		}
		s.kvPort, s.mgmtPort, s.queryPort = ports[0], ports[1], ports[2]
	}
	return s, nil
}

func (s *setteeServer) connStr() string {
	if s.kvPort == defaultKVPort {
		return "couchbase://" + s.host
	}
	return fmt.Sprintf("couchbase://%s:%d", s.host, s.kvPort)
}

func (s *setteeServer) start() error {
	bin := setteeBinary()
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("settee binary not found at %s (build with `cargo build -p settee-server` or set SETTEE_BIN): %w", bin, err)
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	s.logFile = logFile
	args := []string{"server",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--host", s.host,
		"--kv-port", strconv.Itoa(s.kvPort),
		"--mgmt-port", strconv.Itoa(s.mgmtPort),
		"--query-port", strconv.Itoa(s.queryPort),
		"--kv-tls-port", strconv.Itoa(s.kvTLSPort),
		"--mgmt-tls-port", strconv.Itoa(s.mgmtTLSPort),
		"--query-tls-port", strconv.Itoa(s.queryTLSPort),
		"--username", adminUser,
		"--password", adminPassword,
		"--bucket", s.bucket,
		"--bucket-type", "ephemeral",
		"--bucket-ram-mb", "256",
		"--replicas", "0",
	}
	s.cmd = exec.Command(bin, append(args, s.extraArgs...)...)
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(readyTimeout); err != nil {
		s.stop()
		return err
	}
	return nil
}

// waitReady polls GET /pools until it answers 200, the process exits, or the deadline passes.
func (s *setteeServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	url := fmt.Sprintf("http://%s:%d/pools", s.host, s.mgmtPort)
	last := "no attempt"
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("settee exited (%v) before becoming ready; log tail:\n%s", s.exitErr, s.logTail())
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.SetBasicAuth(adminUser, adminPassword)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("settee not ready after %s (%s); log tail:\n%s", timeout, last, s.logTail())
}

// stop sends SIGTERM and waits with a deadline (SIGKILL as a last resort). It returns the exit code, -1 if the
// process had to be killed.
func (s *setteeServer) stop() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return -1
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	code := -1
	select {
	case <-s.exited:
		code = s.cmd.ProcessState.ExitCode()
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	if s.logFile != nil {
		_ = s.logFile.Close()
		s.logFile = nil
	}
	return code
}

func (s *setteeServer) logTail() string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func clusterOptions(user, password string) gocb.ClusterOptions {
	return gocb.ClusterOptions{
		Authenticator: gocb.PasswordAuthenticator{Username: user, Password: password},
		TimeoutsConfig: gocb.TimeoutsConfig{
			ConnectTimeout:    10 * time.Second,
			KVTimeout:         5 * time.Second,
			KVDurableTimeout:  10 * time.Second,
			ManagementTimeout: 20 * time.Second,
		},
	}
}

// connectAs opens a new cluster handle on s (the caller closes it).
func connectAs(s *setteeServer, connStr, user, password string) (*gocb.Cluster, error) {
	if connStr == "" {
		connStr = s.connStr()
	}
	return gocb.Connect(connStr, clusterOptions(user, password))
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Getenv("GOCB_VERBOSE") != "" {
		gocb.SetLogger(gocb.VerboseStdioLogger())
	}
	var err error
	srv, err = newServer(bucketName, useDefaultPorts())
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: cannot prepare server:", err)
		return 1
	}
	if err := srv.start(); err != nil {
		fmt.Fprintln(os.Stderr, "compat: cannot start server:", err)
		return 1
	}
	fmt.Printf("settee: kv=%d mgmt=%d query=%d log=%s\n", srv.kvPort, srv.mgmtPort, srv.queryPort, srv.logPath)
	defer func() {
		if code := srv.stop(); code != 0 {
			fmt.Fprintf(os.Stderr, "compat: settee exited with %d; log tail:\n%s\n", code, srv.logTail())
		} else {
			_ = os.RemoveAll(srv.dir)
		}
	}()

	cluster, err = connectAs(srv, "", adminUser, adminPassword)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: connect:", err)
		return 1
	}
	defer func() { _ = cluster.Close(nil) }()
	bucket = cluster.Bucket(bucketName)
	if err := bucket.WaitUntilReady(30*time.Second, nil); err != nil {
		fmt.Fprintf(os.Stderr, "compat: bucket WaitUntilReady: %v\nlog tail:\n%s\n", err, srv.logTail())
		return 1
	}
	collection = bucket.DefaultCollection()
	return m.Run()
}

// uniqueKey returns a document key unique to this test and call.
func uniqueKey(t *testing.T) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
}

// waitUntil polls cond until it returns nil or the deadline passes, and fails the test with the last error.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last error: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failFast makes an operation report the first error instead of retrying (e.g. LOCKED) until its timeout.
type failFast struct{}

func (failFast) RetryAfter(gocb.RetryRequest, gocb.RetryReason) gocb.RetryAction {
	return &gocb.NoRetryRetryAction{}
}

// requireErrorIs fails the test unless err matches target.
func requireErrorIs(t *testing.T, err, target error, context string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: expected error %v, got success", context, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: expected error %v, got %v", context, target, err)
	}
}

func requireNoError(t *testing.T, err error, context string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", context, err)
	}
}
