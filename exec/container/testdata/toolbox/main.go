// Command toolbox is a static test binary for image-based container tests
// (no busybox offline). It is built by the tests with CGO_ENABLED=0.
//
//	toolbox echo ARGS...       print ARGS
//	toolbox id                 print uid gid
//	toolbox ls DIR             list DIR
//	toolbox shim -- CMD...     a minimal PID 1: forward signals, reap, exit with CMD's status
//	toolbox env                print the environment
//	toolbox cat FILE           copy FILE to stdout
//	nvidia-smi -L              (installed under that name) a stand-in for the
//	                           real one: one line per /dev/nvidiaN it can open
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	if filepath.Base(os.Args[0]) == "nvidia-smi" {
		smi()
		return
	}
	if len(os.Args) < 2 {
		fmt.Println("toolbox")
		return
	}
	switch os.Args[1] {
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "cat":
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	case "id":
		fmt.Println(os.Getuid(), os.Getgid())
	case "ls":
		es, err := os.ReadDir(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, e := range es {
			fmt.Println(e.Name())
		}
	case "shim":
		os.Exit(shim(os.Args[2:]))
	default:
		fmt.Fprintln(os.Stderr, "unknown:", os.Args[1])
		os.Exit(2)
	}
}

// smi lists the GPUs this process can open, as `nvidia-smi -L` does.
func smi() {
	paths, _ := filepath.Glob("/dev/nvidia[0-9]*")
	i := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		f.Close()
		fmt.Printf("GPU %d: stand-in (%s)\n", i, p)
		i++
	}
}

func shim(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 127
	}
	p, err := os.StartProcess(path, args, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Env:   os.Environ(),
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 127
	}
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			syscall.Kill(-p.Pid, sig.(syscall.Signal))
			continue
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == p.Pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		}
	}
	return 0
}
