# rightsize-go watchdog for Windows (Windows PowerShell 5.1; written to also run
# under PowerShell 7). It mirrors watchdog.sh step for step.
#
# NOT EXECUTED BY THIS REPOSITORY'S TESTS: there is no Windows here, and no
# PowerShell (one test only checks that the file is ASCII, has no carriage
# return and is the embedded copy). On Windows the default watchdog is the
# native one, which is the Go side this script hands over to, run at once:
# this script is used only when RIGHTSIZE_WATCHDOG=script asks for it. To
# verify it there: a watchdog whose stdin pipe is still open keeps waiting
# without CPU; the owner's death reads as EOF; PROGRAM then receives every
# line on its stdin, in order.
#
# The waiting half of a watchdog. A Go test process spawns it once, as
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
# While the owner lives, the script waits: each line the owner tells it is
# kept as it is. Nothing is run, no line is looked into.
#
# At EOF (the owner exited, however it died), the script runs PROGRAM with
# the kept lines on its stdin and waits for it. PROGRAM does all the work
# and takes every decision (internal/reaper, runNative). The script holds
# PROGRAM open from its start, sharing it for reading only, so that the
# binary cannot be deleted before it runs; last, it deletes its own copy.

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
# Held until it has started: checked before waiting, and never deleted in
# between.
try {
	$hold = [IO.File]::Open($Program, [IO.FileMode]::Open, [IO.FileAccess]::Read, [IO.FileShare]::Read)
} catch {
	Stop-Watchdog "cannot open PROGRAM $($Program): $_"
}

# The wait. A last line without its newline is kept too.
$stdin = [Console]::In
$told = New-Object System.Collections.Generic.List[string]
while ($null -ne ($line = $stdin.ReadLine())) {
	$told.Add($line)
}

$start = New-Object System.Diagnostics.ProcessStartInfo
$start.FileName = $Program
$start.UseShellExecute = $false
$start.CreateNoWindow = $true
$start.RedirectStandardInput = $true
$p = [Diagnostics.Process]::Start($start)
$hold.Close()
foreach ($l in $told) {
	$p.StandardInput.WriteLine($l)
}
$p.StandardInput.Close()
$p.WaitForExit()
Remove-Item -LiteralPath $PSCommandPath -Force -ErrorAction SilentlyContinue
exit $p.ExitCode
