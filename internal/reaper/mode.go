package reaper

import (
	"os"
	"strings"
)

// Mode is what RIGHTSIZE_REAPER asks for.
type Mode int

const (
	// On: ledger, sweep and watchdog. The default.
	On Mode = iota
	// SweepOnly: ledger and sweep, no watchdog.
	SweepOnly
	// Off: no ledger, no sweep, no watchdog; only the test's own cleanup.
	Off
)

// EnvReaper is the environment variable read by ModeFromEnv.
const EnvReaper = "RIGHTSIZE_REAPER"

// ModeFromEnv reads RIGHTSIZE_REAPER: "off" or "sweep", trimmed and in any
// case; anything else, unset included, is On (a typo must not silently
// disable the backstop).
func ModeFromEnv() Mode { return ParseMode(os.Getenv(EnvReaper)) }

// ParseMode reads a RIGHTSIZE_REAPER value.
func ParseMode(s string) Mode {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off":
		return Off
	case "sweep":
		return SweepOnly
	default:
		return On
	}
}

func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case SweepOnly:
		return "sweep"
	default:
		return "on"
	}
}

// Ledger reports whether the mode keeps a ledger at all.
func (m Mode) Ledger() bool { return m != Off }

// Watchdog reports whether the mode spawns a watchdog.
func (m Mode) Watchdog() bool { return m == On }
