package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// entryLockWait is how long deleting a registry entry waits for a process
// that is creating its sandbox (and holds reuse/<hash>.lock) to finish.
const entryLockWait = 5 * time.Second

func (c *cli) reuse(args []string) error {
	if len(args) == 0 {
		return &usageError{cmd: "reuse", msg: "want rm or prune"}
	}
	switch args[0] {
	case "rm":
		return c.reuseRm(args[1:])
	case "prune":
		return c.reusePrune(args[1:])
	case "-h", "-help", "--help", "help":
		c.commandHelp(c.stdout, "reuse")
		return nil
	}
	if strings.HasPrefix(args[0], "-") {
		return &usageError{cmd: "reuse", msg: fmt.Sprintf("%s before rm or prune (flags come after them)", termtext.Clean(args[0]))}
	}
	return &usageError{cmd: "reuse", msg: fmt.Sprintf("unknown subcommand %s: want rm or prune", termtext.Quote(args[0]))}
}

func (c *cli) reuseRm(args []string) error {
	fs := newFlags("reuse")
	all := fs.Bool("all", false, "")
	dryRun := fs.Bool("dry-run", false, "")
	cacheFlag := fs.String("cache", "", "")
	names, stop, err := c.parseMixed("reuse", fs, args)
	if stop {
		return err
	}
	switch {
	case *all && len(names) > 0:
		return &usageError{cmd: "reuse", msg: "rm: --all or names, not both"}
	case !*all && len(names) == 0:
		return &usageError{cmd: "reuse", msg: "rm: want the names of keep-alive sandboxes, or --all"}
	}
	return c.reuseRun("reuse rm", *cacheFlag, *dryRun, func(ctx context.Context, j *reuseJob) {
		if *all {
			for _, d := range j.v.list {
				j.remove(ctx, d, "")
			}
			j.pruneGone()
			return
		}
		seen := map[string]bool{}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				j.removeNamed(ctx, n)
			}
		}
	})
}

func (c *cli) reusePrune(args []string) error {
	fs := newFlags("reuse")
	olderThan := fs.Duration("older-than", -1, "")
	dryRun := fs.Bool("dry-run", false, "")
	cacheFlag := fs.String("cache", "", "")
	if stop, err := c.parse("reuse", fs, args, 0); stop {
		return err
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "older-than" })
	switch {
	case !set:
		return &usageError{cmd: "reuse", msg: "prune: want --older-than D (a duration such as 12h; 0s for every one)"}
	case *olderThan < 0:
		return &usageError{cmd: "reuse", msg: fmt.Sprintf("prune: --older-than %s: want a positive duration, such as 12h", *olderThan)}
	}
	verb := fmt.Sprintf("reuse prune --older-than %s", *olderThan)
	return c.reuseRun(verb, *cacheFlag, *dryRun, func(ctx context.Context, j *reuseJob) {
		for _, d := range j.v.list {
			j.pruneOne(ctx, d, *olderThan)
		}
		j.pruneGone()
	})
}

// parseMixed parses flags and positional arguments in any order
// (`reuse rm NAME --dry-run`); everything after "--" is positional.
func (c *cli) parseMixed(cmd string, fs *flag.FlagSet, args []string) (positional []string, stop bool, err error) {
	for {
		if stop, err := c.parse(cmd, fs, args, len(args)); stop {
			return nil, true, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), false, nil
		}
		if len(rest) == 0 {
			return positional, false, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// reuseJob is one reuse rm or prune: what the registry and the engine
// said, and one line per sandbox or entry of what was done.
type reuseJob struct {
	cache   string
	dryRun  bool
	entries []regEntry
	v       engineView
	// done: entries already dealt with (their sandbox's line says how).
	done  map[string]bool
	lines []reuseLine

	removed, deleted, kept, refused int
}

// reuseLine is one line of the report: '-' done (or would be), '=' kept
// on purpose, '!' refused or failed.
type reuseLine struct {
	mark byte
	name string
	text string
}

func (c *cli) reuseRun(verb, cacheFlag string, dryRun bool, do func(context.Context, *reuseJob)) error {
	start := time.Now()
	cache, err := cacheDir(cacheFlag)
	if err != nil {
		return err
	}
	entries, err := readRegistry(cache)
	if err != nil {
		return fmt.Errorf("%s: %w; nothing was removed", verb, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rctx, cancel := context.WithTimeout(ctx, backend.ResolveTimeout)
	v := askEngine(rctx)
	cancel()
	defer v.close()
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, msg: verb + ": interrupted before the engine answered; nothing was removed"}
	}
	if v.err != nil {
		return fmt.Errorf("%s: %v; nothing was removed", verb, v.err)
	}
	j := &reuseJob{cache: cache, dryRun: dryRun, entries: entries, v: v, done: map[string]bool{}}
	do(ctx, j)
	j.write(safeWriter{c.stdout}, verb, time.Since(start))
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, msg: verb + ": interrupted; what the lines above do not list was not touched"}
	}
	switch j.refused {
	case 0:
		return nil
	case 1:
		for _, l := range j.lines {
			if l.mark == '!' {
				return fmt.Errorf("%s: %s: %s", verb, termtext.Quote(l.name), l.text)
			}
		}
	}
	return fmt.Errorf("%s: %d sandboxes or entries were refused or not removed (the lines marked ! say why)", verb, j.refused)
}

func (j *reuseJob) line(mark byte, name, format string, a ...any) {
	j.lines = append(j.lines, reuseLine{mark: mark, name: name, text: fmt.Sprintf(format, a...)})
	switch mark {
	case '=':
		j.kept++
	case '!':
		j.refused++
	}
}

// removeNamed removes the keep-alive sandbox name, which a person named:
// whatever its age, whoever uses it, as long as the engine shows it is a
// keep-alive one.
func (j *reuseJob) removeNamed(ctx context.Context, name string) {
	if d, ok := j.v.byName[name]; ok {
		j.remove(ctx, d, "")
		return
	}
	ents := entriesNamed(j.entries, name, j.v.drv.Name())
	if j.dryRun {
		if len(ents) > 0 {
			j.markDone(ents)
			j.deleted += len(ents)
			j.line('-', name, "not on the engine; its registry entry would be deleted")
			return
		}
		j.line('!', name, "would be refused: the engine lists no keep-alive sandbox of that name, and no registry entry names it")
		return
	}
	// Not among the keep-alive sandboxes listed: ask anyway (it may have
	// been created since), so that the engine says what it is.
	since := time.Now()
	err := j.v.ka.RemoveKeepAlive(ctx, name, "")
	switch {
	case err == nil:
		j.removed++
		j.lineEntries(name, "removed", ents, since)
		j.dropUse(name)
	case errors.Is(err, backend.ErrNotFound) && len(ents) > 0:
		j.lineEntries(name, "already gone from the engine", ents, since)
		j.dropUse(name)
	case errors.Is(err, backend.ErrNotFound):
		j.line('!', name, "no such keep-alive sandbox: the engine has none of that name, and no registry entry names it")
	case errors.Is(err, backend.ErrNotOwned):
		j.line('!', name, "refused: %s; left alone", j.notKeepAlive())
	default:
		j.line('!', name, "not removed: %v", err)
	}
}

// notKeepAlive says why something the engine has is not a keep-alive
// sandbox, in the backend's terms.
func (j *reuseJob) notKeepAlive() string {
	if backend.Canonical(j.v.drv.Name()) == backend.Msb {
		return "not a keep-alive sandbox (its name does not start with " + backend.KeepAlivePrefix + ")"
	}
	return "not a keep-alive sandbox (it carries no " + docker.LabelReuse + " label)"
}

// remove removes the keep-alive sandbox d, as listed by the engine, and
// its registry entries; why says why it goes ("" when a person asked).
func (j *reuseJob) remove(ctx context.Context, d backend.Description, why string) {
	ents := entriesNamed(j.entries, d.Name, j.v.drv.Name())
	j.markDone(ents)
	if why != "" {
		why = " (" + why + ")"
	}
	if j.dryRun {
		j.removed++
		j.deleted += len(ents)
		j.line('-', d.Name, "would be removed%s%s", why, entriesWould(ents))
		return
	}
	since := time.Now()
	// By its own mark: a sandbox that took the name since the listing is
	// another one, and stays.
	err := j.v.ka.RemoveKeepAlive(ctx, d.Name, d.KeepAlive)
	switch {
	case err == nil:
		j.removed++
		j.lineEntries(d.Name, "removed"+why, ents, since)
		j.dropUse(d.Name)
	case errors.Is(err, backend.ErrNotFound):
		j.lineEntries(d.Name, "already gone from the engine", ents, since)
		j.dropUse(d.Name)
	default:
		j.line('!', d.Name, "not removed: %v", err)
	}
}

// pruneOne removes d when it is older than olderThan and no rightsize-go
// process uses it.
func (j *reuseJob) pruneOne(ctx context.Context, d backend.Description, olderThan time.Duration) {
	ents := entriesNamed(j.entries, d.Name, j.v.drv.Name())
	created, from := time.Time{}, ""
	for _, e := range ents {
		if e.err != nil {
			continue
		}
		if t, err := ledger.ParseISO(e.entry.CreatedISO); err == nil {
			created, from = t, "createdIso "+e.entry.CreatedISO
			break
		}
	}
	if created.IsZero() && !d.Created.IsZero() {
		created, from = d.Created, "created "+ledger.FormatISO(d.Created)+" by the engine's account"
	}
	if created.IsZero() {
		j.markDone(ents)
		j.line('=', d.Name, "kept: its age is unknown (no registry entry gives it, and the engine does not say)")
		return
	}
	age := max(time.Since(created), 0)
	if age <= olderThan {
		j.markDone(ents)
		j.line('=', d.Name, "kept: %s old (%s), not older than %s", formatDuration(age), termtext.Clean(from), olderThan)
		return
	}
	use, err := j.holdUse(d.Name)
	if err != nil {
		j.markDone(ents)
		j.line('=', d.Name, "kept: %v", err)
		return
	}
	// Held across the removal, so that no process adopts it in between,
	// then deleted: no process holds it (and a dry run leaves no file).
	defer use.Remove()
	j.remove(ctx, d, formatDuration(age)+" old, "+from)
}

// holdUse takes, exclusively, the use lock that every rightsize-go test
// process on this host holds, shared, while it may use keep-alive name
// (ledger.KeepAliveUseLock), whatever its cache dir: an error says why it
// was not taken.
func (j *reuseJob) holdUse(name string) (*ledger.FileLock, error) {
	dir, err := ledger.UseDir("")
	if err != nil {
		return nil, fmt.Errorf("cannot tell whether a test process is using it: %w", err)
	}
	l, err := ledger.KeepAliveUseLock(dir, j.v.drv.Name(), j.v.drv.Endpoint(), name)
	if err != nil {
		return nil, fmt.Errorf("cannot tell whether a test process is using it: %w", err)
	}
	ok, err := l.TryLock()
	switch {
	case err != nil:
		return nil, fmt.Errorf("cannot tell whether a test process is using it: %w", err)
	case !ok:
		return nil, fmt.Errorf("a test process is using it (it holds %s)", l.Path())
	}
	return l, nil
}

// dropUse deletes the use lock of name, once its sandbox is gone, unless
// a test process holds it (prune's own hold deletes it when released).
func (j *reuseJob) dropUse(name string) {
	if l, err := j.holdUse(name); err == nil {
		l.Remove()
	}
}

// pruneGone deletes the registry entries of this engine's backend whose
// sandbox the engine no longer has.
func (j *reuseJob) pruneGone() {
	for _, e := range j.entries {
		if j.done[e.hash] {
			continue
		}
		if !e.backendMatches(j.v.drv.Name()) {
			j.line('=', e.name, "registry entry kept: an %s sandbox's; the engine asked is %s", termtext.Clean(e.entry.Backend), j.v.drv.Name())
			continue
		}
		if _, ok := j.v.byName[e.name]; ok {
			continue
		}
		if !e.mod.IsZero() && !e.mod.Before(j.v.listed) {
			j.line('=', e.name, "registry entry kept: %v", ledger.ErrReuseEntryRewritten)
			continue
		}
		if j.dryRun {
			j.deleted++
			j.line('-', e.name, "registry entry %s would be deleted: its sandbox is gone from the engine", shortHash(e.hash))
			continue
		}
		if err := j.deleteEntry(e, j.v.listed); err != nil {
			j.line('!', e.name, "registry entry %s not deleted: %v", shortHash(e.hash), err)
			continue
		}
		j.deleted++
		j.line('-', e.name, "registry entry %s deleted: its sandbox is gone from the engine", shortHash(e.hash))
	}
}

func (j *reuseJob) markDone(ents []regEntry) {
	for _, e := range ents {
		j.done[e.hash] = true
	}
}

// lineEntries deletes ents, whose sandbox is gone, and adds the sandbox's
// line: what became of it, then of its entries. An entry that could not
// be deleted makes it a failure.
func (j *reuseJob) lineEntries(name, what string, ents []regEntry, since time.Time) {
	j.markDone(ents)
	mark, parts := byte('-'), []string{what}
	for _, e := range ents {
		if err := j.deleteEntry(e, since); err != nil {
			mark = '!'
			parts = append(parts, fmt.Sprintf("registry entry %s not deleted: %v", shortHash(e.hash), err))
			continue
		}
		j.deleted++
		parts = append(parts, fmt.Sprintf("registry entry %s deleted", shortHash(e.hash)))
	}
	if len(ents) == 0 {
		parts = append(parts, "no registry entry")
	}
	j.line(mark, name, "%s", strings.Join(parts, "; "))
}

func entriesWould(ents []regEntry) string {
	var parts []string
	for _, e := range ents {
		parts = append(parts, fmt.Sprintf("registry entry %s would be deleted", shortHash(e.hash)))
	}
	if len(parts) == 0 {
		return "; no registry entry"
	}
	return "; " + strings.Join(parts, "; ")
}

// deleteEntry deletes the registry entry e unless it was written again at
// or after since (a sandbox created since then: the entry is the new
// one's).
func (j *reuseJob) deleteEntry(e regEntry, since time.Time) error {
	return ledger.DeleteReuseEntry(j.cache, e.hash, since, entryLockWait)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// write prints the report: a summary line, then one line per sandbox or
// entry.
func (j *reuseJob) write(w io.Writer, verb string, took time.Duration) {
	var b strings.Builder
	where := fmt.Sprintf("registry %s; %s", filepath.Join(j.cache, ledger.ReuseDir), j.v.where())
	if j.dryRun {
		fmt.Fprintf(&b, "%s (%s; dry run: nothing touched): %d would be removed, %d registry %s would be deleted, %d kept, %d refused\n",
			verb, where, j.removed, j.deleted, plural(j.deleted, "entry", "entries"), j.kept, j.refused)
	} else {
		fmt.Fprintf(&b, "%s (%s): %d removed, %d registry %s deleted, %d kept, %d refused or failed, in %s\n",
			verb, where, j.removed, j.deleted, plural(j.deleted, "entry", "entries"), j.kept, j.refused, took.Round(time.Millisecond))
	}
	for _, l := range j.lines {
		fmt.Fprintf(&b, "  %c %s: %s\n", l.mark, termtext.Quote(l.name), oneLine(l.text))
	}
	io.WriteString(w, b.String())
}
