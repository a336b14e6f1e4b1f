package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
)

// pathResult is one figure of the rest of the path.
type pathResult struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
}

// path runs one of the measurements of the rest of the path.
func (b *bench) path(ctx context.Context, cmd string) ([]pathResult, error) {
	return nil, fmt.Errorf("not implemented yet")
}

func printPath(w io.Writer, rs []pathResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tvalue\tunit\tnote")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\n", r.Name, r.Value, r.Unit, r.Note)
	}
	tw.Flush()
}
