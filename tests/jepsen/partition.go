package jepsen

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"unsafe"
)

// Network partitions between nodes, on one machine.
//
// Every node listens on its own loopback address (127.0.0.11, .12, ...) and, started with
// `--bind-peer-connections`, opens its connections to other nodes from that address; the SDK's connections come
// from 127.0.0.1. A policy routing rule `from A to B blackhole` then drops what node A sends to node B, and only
// that: packets of established connections vanish (the peer sees silence, as with iptables DROP) and new
// connections fail at once. Cutting both directions isolates two nodes; the client still reaches every node, as
// Jepsen's clients do.
//
// The rules must not touch the machine's own routing, so the test runs in a network namespace of its own: the
// test binary re-executes itself with CLONE_NEWNET (needs root or CAP_SYS_ADMIN), brings the namespace's loopback
// up, and moves the `lookup local` rule behind the partition rules (it comes first by default, and loopback
// traffic never reaches a later rule). Where that is not possible the run goes on without partitions and says why.

const (
	envInNamespace = "SETTEE_JEPSEN_NETNS"
	// Partition rules sit before the moved `lookup local` rule.
	partitionRulePref = "1000"
	localRulePref     = "2000"
)

// partitionsUnavailable says why partitions cannot be injected ("" when they can); set once by TestMain.
var partitionsUnavailable = "not set up"

// reexecInNamespace runs this test binary again, with the same arguments, in a new network namespace, and returns
// its exit status; an error when the namespace cannot be created.
func reexecInNamespace() (int, error) {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envInNamespace+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if err := cmd.Wait(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), nil
		}
		return 1, err
	}
	return 0, nil
}

// loopbackUp brings the namespace's loopback interface up (a new namespace starts with it down), with the ioctl
// rather than the `ip` tool, so that the namespace has a network even where `ip` is missing.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct ifreq: the interface name (16 bytes), then the flags (a short) in the union.
	var ifr [40]byte
	copy(ifr[:], "lo")
	flags := (*uint16)(unsafe.Pointer(&ifr[16]))
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", errno)
	}
	*flags |= syscall.IFF_UP | syscall.IFF_RUNNING
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", errno)
	}
	return nil
}

// setUpNamespace prepares the private namespace for partition rules (its loopback is already up).
func setUpNamespace() error {
	steps := [][]string{
		{"rule", "add", "pref", localRulePref, "lookup", "local"},
		{"rule", "del", "pref", "0"},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cut drops everything `from` sends to `to` (one direction).
func cut(from, to *node) error {
	return ip("rule", "add", "pref", partitionRulePref, "from", from.host, "to", to.host, "blackhole")
}

// healPartitions removes every partition rule.
func healPartitions() error {
	for i := 0; i < 1000; i++ {
		out, err := exec.Command("ip", "rule", "del", "pref", partitionRulePref).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "No such file") || strings.Contains(string(out), "not exist") {
				return nil
			}
			return fmt.Errorf("ip rule del: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	return fmt.Errorf("more than 1000 partition rules")
}

// isolate cuts every connection between the nodes of `a` and those of `b`, both ways (`oneWay`: only what `a`
// sends).
func isolate(a, b []*node, oneWay bool) error {
	for _, x := range a {
		for _, y := range b {
			if err := cut(x, y); err != nil {
				return err
			}
			if !oneWay {
				if err := cut(y, x); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
