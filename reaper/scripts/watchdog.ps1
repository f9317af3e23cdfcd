# rightsize-go watchdog for Windows (Windows PowerShell 5.1; written to also run
# under PowerShell 7). It does what watchdog.sh does, and no more.
#
# NOT EXECUTED BY THIS REPOSITORY'S TESTS: they run the Windows build under
# Wine, which has no PowerShell, and none can be installed where they run
# (docs/windows.md). One test checks that the file is ASCII, has no
# carriage return and is the embedded copy. On Windows the default
# watchdog is the native one, which the tests run under Wine: the Go side
# this script hands over to, run at once. This script is used only when
# RIGHTSIZE_WATCHDOG=script asks for it. To verify it there: a watchdog
# whose stdin pipe is still open keeps waiting without CPU; the owner's
# death reads as end of file; PROGRAM then receives everything the owner
# wrote, on its stdin.
#
# A Go test process spawns it once, as
#
#   powershell.exe -NoLogo -NoProfile -NonInteractive -ExecutionPolicy Bypass
#       -File watchdog-<hash>-<pid>-<run>.ps1 PROGRAM
#
# on a copy of this script made for that spawn alone (PowerShell parses the
# whole file before it runs any of it), with stdin the read end of a pipe
# whose write end only that process holds, and with the environment that
# makes PROGRAM the watchdog's Go side (RIGHTSIZE_NATIVE_WATCHDOG=1, the
# run's folder and id, the engine's settings).
#
# The script reads its stdin to the end, keeping it as it is, and runs
# nothing and looks into nothing meanwhile. At the end (the owner exited,
# however it died) it runs PROGRAM with what it read on PROGRAM's stdin,
# waits for it, and deletes its own copy. PROGRAM does all the work and
# takes every decision (internal/reaper, runNative). The script holds
# PROGRAM open from its start, sharing it for reading only, so that the
# binary cannot be deleted before it runs.

param([string]$Program)

$ErrorActionPreference = 'Stop'
trap {
	[Console]::Error.WriteLine("rightsize watchdog: $_")
	exit 1
}

function Stop-Watchdog([string]$Why) {
	[Console]::Error.WriteLine("rightsize watchdog: $Why")
	Remove-Item -LiteralPath $PSCommandPath -Force -ErrorAction SilentlyContinue
	exit 2
}

if (-not $Program -or -not [IO.Path]::IsPathRooted($Program)) {
	Stop-Watchdog "PROGRAM '$Program' is not an absolute path"
}
try {
	$hold = [IO.File]::Open($Program, [IO.FileMode]::Open, [IO.FileAccess]::Read, [IO.FileShare]::Read)
} catch {
	Stop-Watchdog "cannot open PROGRAM $($Program): $_"
}

$told = [Console]::In.ReadToEnd() # the wait

$start = New-Object System.Diagnostics.ProcessStartInfo
$start.FileName = $Program
$start.UseShellExecute = $false
$start.CreateNoWindow = $true
$start.RedirectStandardInput = $true
$p = [Diagnostics.Process]::Start($start)
$hold.Close()
$p.StandardInput.Write($told)
$p.StandardInput.Close()
$p.WaitForExit()
Remove-Item -LiteralPath $PSCommandPath -Force -ErrorAction SilentlyContinue
exit $p.ExitCode
