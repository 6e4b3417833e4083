// Command pause is the sandbox ("pause") container of the test clusters' Pods, built here
// because no registry is reachable: it holds the Pod's namespaces open until SIGTERM or
// SIGINT, and, as PID 1 of a Pod that shares its PID namespace, reaps the zombies the other
// containers leave. internal/ociimage.PauseImage packs it as registry.k8s.io/pause:3.10.1,
// containerd's default sandbox image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (kubelb e2e)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", s)
		os.Exit(0)
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
