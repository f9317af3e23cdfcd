package ledger

import "io"

// ReadLinesFrom lets the external tests (the fuzz target) run the line
// reader on bytes in memory, without a file per input.
func ReadLinesFrom(r io.Reader, base string) (LineFile, error) { return readLines(r, base) }

// ListRuns reads every run in cache/runs into memory, in run id order, as
// ScanRuns and Each give them: the tests' small folders only.
func ListRuns(cache string) ([]RunFiles, error) {
	s, err := ScanRuns(cache)
	if err != nil {
		return nil, err
	}
	var out []RunFiles
	err = s.Each(func(rf RunFiles) error { out = append(out, rf); return nil })
	return out, err
}

// Len is how many runs the scan holds.
func (s *Scan) Len() int {
	n, last := 0, ""
	for i, name := range s.files {
		id, _, _ := runFile(name)
		if i == 0 || id != last {
			n++
		}
		last = id
	}
	return n
}

// TryRLock takes the lock shared unless a holder has it exclusively, once.
func (l *FileLock) TryRLock() (bool, error) { return l.try(lockShared) }
