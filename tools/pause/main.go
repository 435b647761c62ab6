// Command pause holds a pod's namespaces until it is told to stop.
//
// It is the first process of every pod sandbox on the local node: it waits for SIGINT or
// SIGTERM and exits 0, and as PID 1 of the pod it reaps the orphans the pod's containers
// leave behind. It does what registry.k8s.io/pause does, built here from source.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (ome-routing local node)\n")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for received := range signals {
		if received != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
