// Command plot draws the PNG plots of docs/benchmarks.md from the harness's JSON results:
// `go run ./e2e/bench/cmd/plot -doc docs/benchmarks.md docs/benchmarks` reads every
// docs/benchmarks/n*-t*.json, writes time-to-address.png and manager-memory.png beside them
// and, with -doc, rewrites the results tables of that Markdown file between its markers.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"kubelb.dev/kubelb/e2e/bench"
)

func main() {
	doc := flag.String("doc", "", "Markdown file whose results tables are rewritten")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: plot [-doc docs/benchmarks.md] <folder of the JSON results>")
		os.Exit(2)
	}
	dir := flag.Arg(0)
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
	if *doc != "" {
		if err := bench.WriteTables(*doc, results); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Printf("plotted %d results into %s\n", len(results), dir)
}
