package main

import (
	"fmt"
	"os"
	"sync"
)

// demoTB lets the demo reuse the e2e harness outside `go test`: cleanups run in reverse order
// on exit, and a fatal error tears everything down before exiting 1.
type demoTB struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	dirs     []string
}

func (d *demoTB) Helper() {}

func (d *demoTB) Cleanup(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cleanups = append(d.cleanups, f)
}

func (d *demoTB) TempDir() string {
	dir, err := os.MkdirTemp("", "kubelb-demo-")
	if err != nil {
		d.Fatal(err)
	}
	d.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (d *demoTB) Failed() bool { return d.failed }

func (d *demoTB) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func (d *demoTB) Fatal(args ...any) { d.fail(fmt.Sprint(args...)) }

func (d *demoTB) Fatalf(format string, args ...any) { d.fail(fmt.Sprintf(format, args...)) }

func (d *demoTB) FailNow() { d.fail("failed") }

func (d *demoTB) fail(msg string) {
	fmt.Fprintf(os.Stderr, "demo: %s\n", msg)
	d.mu.Lock()
	d.failed = true
	d.mu.Unlock()
	d.teardown()
	os.Exit(1)
}

// teardown runs the cleanups, newest first.
func (d *demoTB) teardown() {
	d.mu.Lock()
	cs := d.cleanups
	d.cleanups = nil
	d.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
