package ledger

// WriteFileAtomic replaces path with data (mode 0600) through a temporary
// file in the same folder and a rename: a reader, or a process killed
// half-way, sees the old content or the new, never a part.
func WriteFileAtomic(path string, data []byte) error { return writeAtomic(path, data) }
