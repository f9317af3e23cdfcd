package main

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// lsFate is one fate in `ls --fates --json`: the fate as written, with
// where it is and whether a process has told it.
type lsFate struct {
	ledger.Fate
	Path    string `json:"path"`
	Written string `json:"writtenIso"`
	Told    bool   `json:"told"`
	Error   string `json:"error,omitempty"`
}

// lsFates lists what became of the runs that ended (newest first): a line
// each, then each one's items; or, with --json, an array of the fates.
func lsFates(w *bufio.Writer, cache string, asJSON bool) error {
	fates, err := ledger.ReadFates(cache)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]lsFate, 0, len(fates))
		for _, f := range fates {
			lf := lsFate{Fate: f.Fate, Path: f.Path, Written: ledger.FormatISO(f.Written), Told: f.Told}
			if lf.Items == nil {
				lf.Items = []ledger.FateItem{}
			}
			if f.Err != nil {
				lf.Error = f.Err.Error()
			}
			out = append(out, lf)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(fates) == 0 {
		fmt.Fprintf(w, "no fates in %s: no run has ended badly since they were last pruned\n", termtext.Clean(ledger.FatesPath(cache)))
		return nil
	}
	for _, f := range fates {
		fmt.Fprintf(w, "%s  %s\n", f.Written.Local().Format("2006-01-02 15:04:05"), reaper.FateLine(f))
		for _, it := range f.Items {
			// Field by field: a newline in a name must not start a line.
			line := fmt.Sprintf("    %s %s", termtext.Clean(it.Kind), termtext.Clean(it.Name))
			if it.ID != "" && it.ID != it.Name {
				line += " (" + termtext.Clean(shortID(it.ID)) + ")"
			}
			line += ": " + termtext.Clean(string(it.Outcome))
			if it.Note != "" {
				line += " (" + termtext.Clean(it.Note) + ")"
			}
			if by := it.Origin.String(); by != "" {
				line += "; left by " + termtext.Clean(by)
			}
			fmt.Fprintln(w, line)
		}
		if f.ItemsOmitted > 0 {
			fmt.Fprintf(w, "    … and %d more\n", f.ItemsOmitted)
		}
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
