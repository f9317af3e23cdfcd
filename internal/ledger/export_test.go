package ledger

import "io"

// ReadLinesFrom lets the external tests (the fuzz target) run the line
// reader on bytes in memory, without a file per input.
func ReadLinesFrom(r io.Reader, base string) (LineFile, error) { return readLines(r, base) }
