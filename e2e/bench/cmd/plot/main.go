// Command plot draws the PNG plots of docs/benchmarks.md from the harness's JSON results:
// `go run ./e2e/bench/cmd/plot docs/benchmarks` reads every docs/benchmarks/n*-t*.json and
// writes time-to-address.png and manager-memory.png beside them.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"kubelb.dev/kubelb/e2e/bench"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: plot <folder of the JSON results>")
		os.Exit(2)
	}
	dir := os.Args[1]
	files, err := filepath.Glob(filepath.Join(dir, "n*-t*.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var results []*bench.Result
	for _, f := range files {
		r, err := bench.Read(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	if err := bench.Plot(results, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("plotted %d results into %s\n", len(results), dir)
}
