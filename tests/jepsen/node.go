package jepsen

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
	"syscall"
	"time"
)

const (
	adminUser     = "Administrator"
	adminPassword = "password"

	readyTimeout = 120 * time.Second
	stopTimeout  = 15 * time.Second
)

// node is one `settee server` process slot: a fixed address, ports and data directory. The process behind it is
// started, killed, paused and restarted by the nemesis; a node that leaves the cluster is stopped and its data
// wiped, so that it can join again later as a new node.
type node struct {
	name                        string
	host                        string
	kvPort, mgmtPort, queryPort int
	dataDir                     string
	logDir                      string

	cmd     *exec.Cmd
	logFile *os.File
	exited  chan struct{}
	starts  int
	paused  bool
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// setteeBinary is $SETTEE_BIN, else the workspace's debug build.
func setteeBinary() string {
	if bin := os.Getenv("SETTEE_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(repoRoot(), "target", "debug", "settee")
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago.
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

// newNodes prepares `count` node slots on 127.0.0.11, .12, ... under `dir`.
func newNodes(count int, dir string) ([]*node, error) {
	ports, err := freePorts(3 * count)
	if err != nil {
		return nil, err
	}
	nodes := make([]*node, count)
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		nodes[i] = &node{
			name: name, host: fmt.Sprintf("127.0.0.%d", 11+i),
			kvPort: ports[3*i], mgmtPort: ports[3*i+1], queryPort: ports[3*i+2],
			dataDir: filepath.Join(dir, "data", name), logDir: dir,
		}
	}
	return nodes, nil
}

func (n *node) otp() string      { return "ns_1@" + n.host }
func (n *node) mgmtAddr() string { return fmt.Sprintf("%s:%d", n.host, n.mgmtPort) }
func (n *node) kvAddr() string   { return fmt.Sprintf("%s:%d", n.host, n.kvPort) }

func (n *node) String() string { return n.name + "(" + n.host + ")" }

// running reports whether the process is alive (paused counts as alive).
func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// start launches the process (joining `seed`, "host:mgmtport", on a first start when not empty) and waits until
// its management port answers.
func (n *node) start(seed string) error {
	if n.running() {
		return fmt.Errorf("%s is already running", n)
	}
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		return err
	}
	n.starts++
	logFile, err := os.Create(filepath.Join(n.logDir, fmt.Sprintf("%s.%d.log", n.name, n.starts)))
	if err != nil {
		return err
	}
	args := []string{"server",
		"--data-dir", n.dataDir,
		"--host", n.host,
		"--kv-port", strconv.Itoa(n.kvPort),
		"--mgmt-port", strconv.Itoa(n.mgmtPort),
		"--query-port", strconv.Itoa(n.queryPort),
		"--username", adminUser,
		"--password", adminPassword,
		"--bucket", "",
		"--bind-peer-connections",
	}
	if seed != "" {
		args = append(args, "--join", seed)
	}
	cmd := exec.Command(setteeBinary(), args...)
	// A node never outlives the test, even one killed (SIGQUIT for its goroutines, a timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "SETTEE_LOG=info")
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return err
	}
	n.cmd, n.logFile, n.paused = cmd, logFile, false
	exited := make(chan struct{})
	n.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return n.waitReady(readyTimeout)
}

// waitReady polls GET /pools until it answers 200, the process exits or the deadline passes.
func (n *node) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	last := "no attempt"
	for time.Now().Before(deadline) {
		if !n.running() {
			return fmt.Errorf("%s exited before becoming ready", n)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.mgmtAddr()+"/pools", nil)
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
	return fmt.Errorf("%s not ready after %s (%s)", n, timeout, last)
}

func (n *node) signal(sig syscall.Signal) error {
	if !n.running() {
		return fmt.Errorf("%s is not running", n)
	}
	return n.cmd.Process.Signal(sig)
}

// kill sends SIGKILL (a crash: nothing flushed, nothing closed) and waits for the process to go.
func (n *node) kill() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return n.reap()
}

func (n *node) pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.paused = true
	return nil
}

func (n *node) resume() error {
	if err := n.signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.paused = false
	return nil
}

// stop resumes a paused process, sends SIGTERM and waits, with SIGKILL as a last resort.
func (n *node) stop() {
	if !n.running() {
		n.closeLog()
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
	n.paused = false
	n.closeLog()
}

// wipe stops the process and deletes its data: the slot can join a cluster again as a new node.
func (n *node) wipe() error {
	n.stop()
	return os.RemoveAll(n.dataDir)
}

func (n *node) reap() error {
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		return errors.New(n.String() + " did not exit")
	}
	n.paused = false
	n.closeLog()
	return nil
}

func (n *node) closeLog() {
	if n.logFile != nil {
		_ = n.logFile.Close()
		n.logFile = nil
	}
}
