package scripts

// The scripts as the reaper reads them out of FS.
var (
	WatchdogSh, _  = FS.ReadFile("watchdog.sh")
	WatchdogPs1, _ = FS.ReadFile("watchdog.ps1")
)
