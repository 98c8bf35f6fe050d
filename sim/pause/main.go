// Command gpupoc-pause is the sandbox ("pause") process of the sim's real nodes, gpupoc's own: it holds a pod's
// namespaces open for the pod's containers, reaps the zombies a shared PID namespace leaves to PID 1, and exits 0
// when the runtime stops the sandbox (SIGINT or SIGTERM). It is the entrypoint of the image gpupoc.local/pause:1,
// which `gpupoc sim up --real-nodes N` builds and imports into each real node's containerd (no registry is reachable).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("gpupoc-pause 1")
		return
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every child that has exited (one SIGCHLD may stand for several).
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
