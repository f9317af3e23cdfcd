//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend/memory"
)

// memorySide is the memory backend: its objects are files of this host,
// and its journal (RIGHTSIZE_MEMORY_JOURNAL) says who made and removed
// each, written before the file is.
type memorySide struct {
	dir, journal string
	mu           sync.Mutex
	off          int64
}

func (m *memorySide) setup(_ context.Context, h *harness, e *engine) error {
	m.dir = filepath.Join(h.cache, "memory")
	m.journal = filepath.Join(h.work, "journal")
	if err := os.WriteFile(m.journal, nil, 0o600); err != nil {
		return err
	}
	e.env = append(e.env, "RIGHTSIZE_BACKEND=memory", memory.EnvJournal+"="+m.journal)
	return nil
}

func (m *memorySide) follow(ctx context.Context, h *harness) {
	for ctx.Err() == nil {
		m.read(h)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	m.read(h)
}

// read takes the journal's new whole lines.
func (m *memorySide) read(h *harness) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, err := os.Open(m.journal)
	if err != nil {
		h.note("journal: " + err.Error())
		return
	}
	defer f.Close()
	if _, err := f.Seek(m.off, io.SeekStart); err != nil {
		return
	}
	n, err := memory.ReadJournal(f, func(e memory.Entry) {
		obj := object{kind: e.Kind, name: e.Name, id: e.ID, run: e.Run, keepAlive: e.KeepAlive, createdBy: e.PID, at: e.At}
		if e.Removal() {
			h.removed(obj, e.PID, e.At)
		} else {
			h.created(obj)
		}
	})
	m.off += n
	if err != nil {
		h.violate(nil, "the memory journal does not parse: "+err.Error())
		m.off = 1 << 62 // said once
	}
}

func (m *memorySide) settle(_ context.Context, h *harness) { m.read(h) }

// leftovers lists the objects of the folder that are some run's.
func (m *memorySide) leftovers(_ context.Context, h *harness) []leftover {
	ents, _ := os.ReadDir(m.dir)
	var out []leftover
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.dir, n))
		if err != nil {
			continue
		}
		var obj struct {
			Kind, Name, Run, KeepAlive string
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			out = append(out, leftover{msg: fmt.Sprintf("memory object file %s does not parse: %v", n, err)})
			continue
		}
		if obj.KeepAlive != "" || strings.HasPrefix(obj.Name, "rz-reuse-") {
			continue // kept alive on purpose
		}
		h.mu.Lock()
		o := h.byRun[obj.Run]
		h.mu.Unlock()
		who := "no owner the harness knows"
		if o != nil {
			who = fmt.Sprintf("owner #%d", o.plan.Index)
		}
		out = append(out, leftover{owner: o, msg: fmt.Sprintf("%s %s of run %s (%s) is still there after every owner died and a sweep ran", obj.Kind, obj.Name, obj.Run, who)})
	}
	return out
}

func (m *memorySide) cleanup(context.Context, *harness) {}
func (m *memorySide) close()                            {}
