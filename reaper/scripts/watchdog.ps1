# rightsize-go watchdog for Windows (Windows PowerShell 5.1; written to also run
# under PowerShell 7).
#
# NOT EXECUTED BY THIS REPOSITORY'S TESTS: it was written on a Linux machine
# without PowerShell. It mirrors watchdog.sh, which is tested under dash,
# bash --posix and busybox ash; anything here that has not been run on Windows
# is a guess until a Windows CI job runs it. Things to verify there first:
#   - a watchdog whose stdin pipe is still open keeps waiting (powershell.exe
#     must not consume or close stdin before the script reads it);
#   - empty GONE/RETRY arguments and words starting with '-' arrive intact
#     (see Get-ScriptArguments below);
#   - [IO.File]::Replace and Move-Item -Force behave as described.
#
# Spawned once per test process, e.g.
#   powershell.exe -NoLogo -NoProfile -NonInteractive -ExecutionPolicy Bypass
#       -File watchdog.ps1 RUNS_DIR RUN_ID [STEP ...]
#   STEP := LIST MODE GONE RETRY N WORD1 ... WORDN
# with stdin the read end of a pipe whose write end only that process holds.
# It blocks reading stdin; at EOF (the owner exited, however it died) it
# removes the run's sandboxes and networks with the engine's command line and
# deletes the run's ledger files.
#
#   RUNS_DIR  absolute path of the ledger's runs folder
#   RUN_ID    file stem: RUNS_DIR\RUN_ID.json, .sandboxes, .networks; refused
#             when empty, containing '/', '\' or ':', or starting with '.' or '-'
#   LIST      sandboxes | networks: the line file the names come from
#   MODE      batch: one call with every name, then one call per name if that
#             call failed; each: one call per name
#   GONE      newline-separated fixed strings: a failed call whose output holds
#             one of them means "does not exist" (exit 126/127 never do)
#   RETRY     newline-separated fixed strings: a failed call whose output holds
#             one of them is run once more after 0.5 s
#   N WORDS   the command (WORD1 an absolute program path) and its leading
#             arguments; names are appended as separate arguments
#
# The last step given for a list decides each of its names: success or GONE
# removes the name from the ledger, anything else keeps it (and the record).
# Earlier steps for the same list are best effort. A line file that is a
# reparse point (symlink, junction) or not a regular file is not read: its
# names count as none, it is left in place, and the record is kept.
#
# File content is data, never code: a name must match
# \A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\z (case-sensitive match, so no Unicode
# case folding) and is passed as one argument; nothing is ever evaluated.
#
# Windows PowerShell 5.1 builds a native command line without escaping
# embedded double quotes and drops empty arguments: the command words must
# contain neither (names cannot).

Set-StrictMode -Version 2.0
$ErrorActionPreference = 'Stop'

$script:SelfPath = $MyInvocation.MyCommand.Path
$script:RunIdForLog = '?'
$script:NameRegex = '\A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\z'

function Write-Log([string]$Message) {
    try {
        [Console]::Error.WriteLine(('rightsize watchdog [{0}]: {1}' -f $script:RunIdForLog, $Message))
    } catch {
        # A closed stderr must not stop the reaping.
    }
}

function Exit-Usage([string]$Message) {
    Write-Log $Message
    try {
        [Console]::Error.WriteLine('usage: watchdog.ps1 RUNS_DIR RUN_ID [LIST MODE GONE RETRY N WORD1 ... WORDN] ...')
    } catch {
    }
    exit 2
}

# Get-ScriptArguments returns the script's arguments exactly as the process
# received them: the words after "-File <this script>" on powershell.exe's own
# command line, split by the same rules Go's os/exec quotes for. powershell.exe
# binds -File arguments like parameters (a word such as '-f' may be taken for
# a parameter name, and empty strings have been known to vanish), so $args is
# only the fallback, used when the command line does not show -File.
function Get-ScriptArguments([object[]]$Bound) {
    if ($null -eq $Bound) {
        $Bound = @()
    }
    $fallback = [string[]]@($Bound | ForEach-Object { [string]$_ })
    try {
        $raw = [Environment]::GetCommandLineArgs()
    } catch {
        return ,$fallback
    }
    for ($i = 1; $i -lt $raw.Length - 1; $i++) {
        if ($raw[$i] -eq '-File' -or $raw[$i] -eq '-f') {
            try {
                $candidate = [IO.Path]::GetFullPath($raw[$i + 1])
            } catch {
                return ,$fallback
            }
            if ($null -eq $script:SelfPath -or $candidate -ne [IO.Path]::GetFullPath($script:SelfPath)) {
                return ,$fallback
            }
            if ($i + 2 -ge $raw.Length) {
                return ,([string[]]@())
            }
            return ,([string[]]$raw[($i + 2)..($raw.Length - 1)])
        }
    }
    return ,$fallback
}

# Test-AbsolutePath: a drive path (C:\...) or a UNC path (\\server\...); a
# /rooted path only where / is the separator (PowerShell 7 off Windows, useful
# to try this script there).
function Test-AbsolutePath([string]$Path) {
    if ($Path -match '\A[A-Za-z]:[\\/]' -or $Path -match '\A[\\/][\\/][^\\/]') {
        return $true
    }
    return ([IO.Path]::DirectorySeparatorChar -eq [char]'/' -and $Path.StartsWith('/'))
}

# ---------------------------------------------------------------------------
# Arguments: everything is checked before waiting, so a caller that passes
# nonsense learns it at once (exit 2), not after it died.

$argv = Get-ScriptArguments $args
if ($argv.Length -lt 2) {
    Exit-Usage 'need RUNS_DIR and RUN_ID'
}
$runsDir = $argv[0]
$runId = $argv[1]
if ($runId -eq '' -or $runId.Contains('/') -or $runId.Contains('\') -or $runId.Contains(':') -or
    $runId.StartsWith('.') -or $runId.StartsWith('-')) {
    Exit-Usage ("refusing RUN_ID '{0}': empty, contains '/', '\' or ':', or starts with '.' or '-'" -f $runId)
}
$script:RunIdForLog = $runId
if (-not (Test-AbsolutePath $runsDir)) {
    Exit-Usage ("RUNS_DIR '{0}' is not an absolute path" -f $runsDir)
}

$steps = New-Object System.Collections.ArrayList
$lastStep = @{ sandboxes = 0; networks = 0 }
$k = 2
while ($k -lt $argv.Length) {
    $index = $steps.Count + 1
    if ($argv.Length - $k -lt 6) {
        Exit-Usage "step ${index}: need LIST MODE GONE RETRY N WORD1..."
    }
    $list = $argv[$k]
    $mode = $argv[$k + 1]
    if ($list -cne 'sandboxes' -and $list -cne 'networks') {
        Exit-Usage "step ${index}: LIST '$list' is not sandboxes or networks"
    }
    if ($mode -cne 'batch' -and $mode -cne 'each') {
        Exit-Usage "step ${index}: MODE '$mode' is not batch or each"
    }
    if ($argv[$k + 4] -cnotmatch '\A[1-9][0-9]{0,2}\z') {
        Exit-Usage ("step ${index}: N '{0}' is not a number from 1 to 999" -f $argv[$k + 4])
    }
    $n = [int]$argv[$k + 4]
    if ($argv.Length - ($k + 5) -lt $n) {
        Exit-Usage ("step ${index}: N is $n but only {0} words follow" -f ($argv.Length - ($k + 5)))
    }
    $words = [string[]]$argv[($k + 5)..($k + 4 + $n)]
    if (-not (Test-AbsolutePath $words[0])) {
        Exit-Usage ("step ${index}: program '{0}' is not an absolute path" -f $words[0])
    }
    [void]$steps.Add(@{
            Index = $index
            List  = $list
            Mode  = $mode
            Gone  = [string[]]@($argv[$k + 2] -split "`r?`n" | Where-Object { $_ -ne '' })
            Retry = [string[]]@($argv[$k + 3] -split "`r?`n" | Where-Object { $_ -ne '' })
            Words = $words
        })
    $lastStep[$list] = $index
    $k += 5 + $n
}

# Do not pin the caller's working directory: on Windows it could then not be
# deleted while the watchdog waits.
try {
    Set-Location -LiteralPath ([Environment]::GetFolderPath('System'))
    [Environment]::CurrentDirectory = [Environment]::GetFolderPath('System')
} catch {
}

# ---------------------------------------------------------------------------
# Wait: read raw stdin to EOF, discarding it, with a fixed 4 KiB buffer.

try {
    $stdin = [Console]::OpenStandardInput()
    $buffer = New-Object byte[] 4096
    while ($stdin.Read($buffer, 0, $buffer.Length) -gt 0) {
    }
} catch {
    Write-Log ("reading stdin failed ({0}); treating it as EOF" -f $_.Exception.Message)
}

Write-Log "owner gone (stdin closed): reaping run $runId in $runsDir"

# [IO.Path]::Combine, not Join-Path: Join-Path fails on a drive PowerShell
# does not know.
$recordFile = [IO.Path]::Combine($runsDir, "$runId.json")
$listFiles = @{
    sandboxes = [IO.Path]::Combine($runsDir, "$runId.sandboxes")
    networks  = [IO.Path]::Combine($runsDir, "$runId.networks")
}

function Test-Present([string]$Path) {
    # Test-Path follows links; the attributes do not, so a dangling link counts.
    try {
        [void][IO.File]::GetAttributes($Path)
        return $true
    } catch {
        return $false
    }
}

if (-not (Test-Present $recordFile) -and -not (Test-Present $listFiles.sandboxes) -and -not (Test-Present $listFiles.networks)) {
    Write-Log 'no ledger files: nothing to do'
    exit 0
}

# ---------------------------------------------------------------------------
# Names.

# Read-NameList returns @{ State = absent|read|unsafe; Names = sorted unique }.
function Read-NameList([string]$Path) {
    $result = @{ State = 'absent'; Names = [string[]]@() }
    try {
        $attributes = [IO.File]::GetAttributes($Path)
    } catch {
        $e = $_.Exception
        if ($e -is [Management.Automation.MethodInvocationException] -and $null -ne $e.InnerException) {
            $e = $e.InnerException
        }
        if ($e -is [IO.FileNotFoundException] -or $e -is [IO.DirectoryNotFoundException]) {
            return $result
        }
        Write-Log ("{0}: cannot inspect it ({1}); not read, the record is kept" -f $Path, $_.Exception.Message)
        $result.State = 'unsafe'
        return $result
    }
    if ($attributes -band [IO.FileAttributes]::ReparsePoint) {
        Write-Log "$Path is a reparse point (symbolic link or junction): not read, left in place; the record is kept"
        $result.State = 'unsafe'
        return $result
    }
    if ($attributes -band [IO.FileAttributes]::Directory) {
        Write-Log "$Path is not a regular file: not read, left in place; the record is kept"
        $result.State = 'unsafe'
        return $result
    }
    try {
        $bytes = [IO.File]::ReadAllBytes($Path)
    } catch {
        Write-Log ("{0}: cannot read it ({1}); left in place, the record is kept" -f $Path, $_.Exception.Message)
        $result.State = 'unsafe'
        return $result
    }
    # ISO-8859-1 maps every byte to one character, so NUL and non-ASCII bytes
    # stay visible to the (ASCII-only) name pattern and are rejected.
    $text = [Text.Encoding]::GetEncoding(28591).GetString($bytes)
    $trim = [char[]]@([char]32, [char]9, [char]13, [char]11, [char]12)
    $names = New-Object 'System.Collections.Generic.SortedSet[string]' ([StringComparer]::Ordinal)
    $bad = 0
    foreach ($line in $text.Split([char]10)) {
        $name = $line.Trim($trim)
        if ($name.Length -eq 0) {
            continue
        }
        if ($name.Length -le 128 -and $name -cmatch $script:NameRegex -and $name -cnotmatch '\A[0-9A-Fa-f]{1,11}\z') {
            [void]$names.Add($name)
        } else {
            $bad++
        }
    }
    if ($bad -gt 0) {
        Write-Log "${Path}: skipped $bad invalid line(s); they are dropped from the ledger"
    }
    $result.State = 'read'
    $result.Names = [string[]]@($names)
    return $result
}

$lists = @{
    sandboxes = Read-NameList $listFiles.sandboxes
    networks  = Read-NameList $listFiles.networks
}
Write-Log ('sandboxes: {0} name(s); networks: {1} name(s)' -f $lists.sandboxes.Names.Length, $lists.networks.Names.Length)

# ---------------------------------------------------------------------------
# Calls.

function Test-OutputHas([string]$Output, [string[]]$Patterns) {
    foreach ($p in $Patterns) {
        if ($p.Length -gt 0 -and $Output.IndexOf($p, [StringComparison]::Ordinal) -ge 0) {
            return $true
        }
    }
    return $false
}

# Invoke-Once runs the command once and returns @{ Code; Output }.
function Invoke-Once([string[]]$Command) {
    # Native stderr arrives as error records under 2>&1; they are output here,
    # not errors, and must not stop the script.
    $ErrorActionPreference = 'Continue'
    $exe = $Command[0]
    $rest = @()
    if ($Command.Length -gt 1) {
        $rest = $Command[1..($Command.Length - 1)]
    }
    $code = 1
    $output = ''
    try {
        $global:LASTEXITCODE = 0
        $lines = & $exe @rest 2>&1 | ForEach-Object { [string]$_ }
        $code = $LASTEXITCODE
        if ($null -eq $code) {
            $code = 0
        }
        $output = (@($lines) -join "`n")
    } catch {
        $code = 127
        $output = $_.Exception.Message
    }
    return @{ Code = $code; Output = $output }
}

# Get-Result classifies a call: ok | gone | retry | fail. A batch call is
# never "gone": its output cannot say which name is missing.
function Get-Result($Call, $Step, [bool]$Batch) {
    if ($Call.Code -eq 0) {
        return 'ok'
    }
    if ($Call.Code -eq 126 -or $Call.Code -eq 127) {
        return 'fail'
    }
    if (-not $Batch -and (Test-OutputHas $Call.Output $Step.Gone)) {
        return 'gone'
    }
    if (Test-OutputHas $Call.Output $Step.Retry) {
        return 'retry'
    }
    return 'fail'
}

function Write-CallLog([string]$Label, $Call, [string]$Result) {
    Write-Log ('{0}: exit {1} ({2})' -f $Label, $Call.Code, $Result)
    if ($Call.Code -ne 0 -and $Call.Output.Length -gt 0) {
        foreach ($line in $Call.Output.Split([char]10)) {
            Write-Log ('    | {0}' -f $line)
        }
    }
}

# Invoke-Attempt: one call, and once more after 0.5 s if its output asked for
# a retry. Returns ok | gone | fail.
function Invoke-Attempt($Step, [string]$What, [string[]]$Command, [bool]$Batch) {
    $label = 'step {0} ({1} {2}) {3}' -f $Step.Index, $Step.List, $Step.Mode, $What
    $call = Invoke-Once $Command
    $result = Get-Result $call $Step $Batch
    Write-CallLog $label $call $result
    if ($result -eq 'retry') {
        Start-Sleep -Milliseconds 500
        $call = Invoke-Once $Command
        $result = Get-Result $call $Step $Batch
        if ($result -eq 'retry') {
            $result = 'fail'
        }
        Write-CallLog "$label (retry)" $call $result
    }
    return $result
}

# Invoke-Step runs one step over names; returns @{ Runnable; Kept }.
function Invoke-Step($Step, [string[]]$Names) {
    $exe = $Step.Words[0]
    $kept = New-Object System.Collections.Generic.List[string]
    $isFile = $false
    try {
        $isFile = -not ([IO.File]::GetAttributes($exe) -band [IO.FileAttributes]::Directory)
    } catch {
    }
    if (-not $isFile) {
        Write-Log ("step {0} ({1} {2}): program '{3}' is not a file: every {1} name is kept" -f $Step.Index, $Step.List, $Step.Mode, $exe)
        return @{ Runnable = $false; Kept = [string[]]@() }
    }
    if ($Step.Mode -ceq 'batch') {
        $result = Invoke-Attempt $Step ("batch of {0}" -f $Names.Length) ([string[]]($Step.Words + $Names)) $true
        if ($result -eq 'ok') {
            return @{ Runnable = $true; Kept = [string[]]@() }
        }
        Write-Log ('step {0} ({1} {2}): the batch call failed; one name at a time' -f $Step.Index, $Step.List, $Step.Mode)
    }
    foreach ($name in $Names) {
        $result = Invoke-Attempt $Step $name ([string[]]($Step.Words + @($name))) $false
        if ($result -ne 'ok' -and $result -ne 'gone') {
            $kept.Add($name)
        }
    }
    return @{ Runnable = $true; Kept = [string[]]$kept.ToArray() }
}

# Invoke-Pass runs every step once over the lists; returns @{ Kept; Forced }.
function Invoke-Pass {
    $passKept = @{ sandboxes = [string[]]@(); networks = [string[]]@() }
    $passForced = @{ sandboxes = $false; networks = $false }
    foreach ($step in $steps) {
        $names = $lists[$step.List].Names
        if ($names.Length -eq 0) {
            Write-Log ('step {0} ({1} {2}): no names' -f $step.Index, $step.List, $step.Mode)
            continue
        }
        $outcome = Invoke-Step $step $names
        if (-not $outcome.Runnable) {
            $passForced[$step.List] = $true
        }
        if ($step.Index -eq $lastStep[$step.List]) {
            $passKept[$step.List] = $outcome.Kept
        }
    }
    return @{ Kept = $passKept; Forced = $passForced }
}

# Two passes, RIGHTSIZE_WATCHDOG_SETTLE seconds apart (default 2, 0 for one):
# a create the owner sent just before it died may be finished by the engine
# after the first pass found no such name. The second pass decides.
$pass = Invoke-Pass
$settle = 2.0
if ($env:RIGHTSIZE_WATCHDOG_SETTLE -match '\A[0-9]+(\.[0-9]+)?\z') {
    $settle = [double]$env:RIGHTSIZE_WATCHDOG_SETTLE
}
if ($settle -gt 0 -and ($lists['sandboxes'].Names.Length + $lists['networks'].Names.Length) -gt 0) {
    Write-Log "second pass in ${settle}s: a create sent just before the owner died may finish after the first"
    Start-Sleep -Milliseconds ([int]($settle * 1000))
    $pass = Invoke-Pass
}
$kept = $pass.Kept
$forced = $pass.Forced

# A list whose names were never decided by a runnable last step keeps them all.
foreach ($list in @('sandboxes', 'networks')) {
    if ($forced[$list] -or $lastStep[$list] -eq 0) {
        $kept[$list] = $lists[$list].Names
        if ($lastStep[$list] -eq 0 -and $lists[$list].Names.Length -gt 0) {
            Write-Log "no step for ${list}: every $list name is kept"
        }
    }
}

# ---------------------------------------------------------------------------
# Ledger files.

function Remove-IfPresent([string]$Path) {
    try {
        if (Test-Present $Path) {
            Remove-Item -LiteralPath $Path -Force
        }
    } catch {
        Write-Log ("{0}: could not delete it ({1})" -f $Path, $_.Exception.Message)
    }
}

if ($kept.sandboxes.Length -eq 0 -and $kept.networks.Length -eq 0 -and
    $lists.sandboxes.State -ne 'unsafe' -and $lists.networks.State -ne 'unsafe') {
    # Line files before the record: a reader never sees names without a record.
    Remove-IfPresent $listFiles.sandboxes
    Remove-IfPresent $listFiles.networks
    Remove-IfPresent $recordFile
    Write-Log 'everything removed; ledger files deleted'
    exit 0
}

# Write-NameList replaces Path with Names, one per line, via a temporary file
# in the same folder: File.Replace swaps it in atomically; Move-Item -Force
# (delete, then move) is the fallback.
function Write-NameList([string]$Path, [string[]]$Names) {
    $tmp = [IO.Path]::Combine($runsDir, ('.{0}.tmp.{1}' -f [IO.Path]::GetFileName($Path), $PID))
    $content = (@($Names | ForEach-Object { $_ + "`n" })) -join ''
    try {
        if (Test-Present $tmp) {
            Remove-Item -LiteralPath $tmp -Force
        }
        # No BOM: the other languages read these files as plain UTF-8.
        [IO.File]::WriteAllText($tmp, $content, (New-Object Text.UTF8Encoding $false))
        try {
            [IO.File]::Replace($tmp, $Path, [NullString]::Value)
        } catch {
            Move-Item -LiteralPath $tmp -Destination $Path -Force
        }
        Write-Log ('{0}: kept {1} name(s)' -f $Path, $Names.Length)
    } catch {
        Write-Log ('{0}: could not rewrite it ({1}); left as it was' -f $Path, $_.Exception.Message)
        Remove-IfPresent $tmp
    }
}

foreach ($list in @('sandboxes', 'networks')) {
    if ($lists[$list].State -eq 'read') {
        Write-NameList $listFiles[$list] $kept[$list]
    }
}
Write-Log "something was kept; $recordFile stays for a later sweep"
exit 0
