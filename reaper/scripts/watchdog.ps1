# rightsize-go watchdog for Windows (Windows PowerShell 5.1; written to also run
# under PowerShell 7). Same protocol and decisions as watchdog.sh.
#
# NOT EXECUTED BY THIS REPOSITORY'S TESTS: it was written on a Linux machine
# without PowerShell, and no test here runs it (one only checks that the file
# is ASCII, has no carriage return and is the embedded copy). It mirrors
# watchdog.sh, which is tested under dash, bash --posix and busybox ash;
# anything here is a guess until a Windows CI job runs it. To verify there:
#   - a watchdog whose stdin pipe is still open keeps waiting, without CPU
#     (powershell.exe and pwsh.exe must neither consume nor close stdin before
#     the script reads it), and the owner's death reads as EOF (a broken pipe
#     is 0 bytes read, not an exception);
#   - empty GONE/RETRY arguments and words starting with '-' arrive intact
#     (Get-ScriptArguments), under powershell.exe and under pwsh.exe;
#   - ConvertTo-NativeArgument: docker receives the finder's --format word,
#     with its embedded double quotes and spaces, as one argument;
#   - Invoke-Native: a console program started by this detached process opens
#     no window, its stdout and stderr are both captured without deadlock,
#     and a call past the time bound is killed and counted as failed;
#   - Test-Flag's integer tests of file attributes, [IO.File]::Replace with a
#     null backup name, and the Move fallbacks behave as described;
#   - the script's own copy can be deleted while it runs (PowerShell keeps no
#     handle on a -File script after parsing it), and every exit deletes it;
#   - the script-level trap turns an unexpected error into exit 1.
#
# The owner spawns it as
#   powershell.exe -NoLogo -NoProfile -NonInteractive -ExecutionPolicy Bypass
#       -File watchdog-<hash>-<pid>-<run>.ps1 RUNS_DIR RUN_ID [STEP ...]
#   STEP := KIND ROLE MODE GONE RETRY N WORD1 ... WORDN
# on a copy of this script made for that spawn alone (PowerShell parses the
# whole file before running any of it), with stdin the read end of a pipe
# whose write end only the owner holds. The owner tells the script, on that
# pipe, what it created; at EOF (the owner exited, however it died) the
# script removes it, finds and removes what still carries the run's label,
# and deletes the run's ledger files. Last, it deletes its own copy: nothing
# else does.
#
#   RUNS_DIR  absolute path of the ledger's runs folder
#   RUN_ID    file stem: RUNS_DIR\RUN_ID.json, .gorecord, .sandboxes, .networks; refused
#             when empty, containing '/', '\' or ':', or starting with '.' or '-'
#   KIND      sandboxes | networks
#   ROLE      act: WORDS with ids appended removes them
#             find: WORDS, complete, prints "ID|NAME|MARK" for each sandbox
#             or network carrying the run's label. A KIND with a finder is
#             "labelled": its second pass acts on what the finder prints,
#             never on a name from anywhere else
#   MODE      batch: one call with every id, then one call per id if that
#             failed; each: one call per id (a finder's is ignored: "-")
#   GONE      newline-separated fixed strings: a failed call on one id whose
#             output holds one of them means "does not exist" (exit 126 and
#             127 never do)
#   RETRY     newline-separated fixed strings: a failed call whose output
#             holds one of them is run once more after 0.5 s
#   N WORDS   the command (WORD1 an absolute path of a program, an .exe: a
#             .cmd or .bat would be run by cmd.exe with other quoting rules)
#             and its leading arguments
#
# What the owner tells, one line each on stdin (anything else is ignored,
# and so is a last line without its newline):
#
#   +s ID NAME   a sandbox it created (or is creating)
#   -s ID NAME   one it removed itself
#   +n ID NAME   a network; -n ID NAME
#
# At EOF, the first pass runs every act step over the told ids. Then,
# RIGHTSIZE_WATCHDOG_SETTLE seconds later (default 2; 0 for no wait), the
# second pass: for a labelled kind, its finder, then its act steps over what
# it found and what the first pass failed to remove; for another kind, the
# act steps over the told ids again. With no wait and no finder at all there
# is no second pass.
#
# Decision: a labelled kind is clean when its finder answered and whatever
# was acted on in the second pass was removed (or was gone). Another kind
# keeps each told name whose last act step failed. When every kind is clean
# and nothing is kept, the line files and then the record are deleted;
# otherwise the record stays for a later sweep, a labelled kind's line file
# is left as it is (a superset of what lives), and another kind's is
# rewritten with what it keeps (only a regular file, never a reparse point).
#
# Each call is bounded by RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds (default
# 120), output included: a call stopped for it has failed, whatever it
# printed, and every later call is skipped (failed too).
#
# Nothing read from the pipe, from an engine's output or from a file is ever
# run or evaluated: ids and names must match
# \A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\z (a case-sensitive match, so no
# Unicode case folding) and are passed as separate arguments. The ledger's
# line files are never read. Commands are started with
# System.Diagnostics.Process and a command line this script quotes itself
# (the rules of CommandLineToArgvW, which Go programs such as docker follow):
# Windows PowerShell 5.1's own native calls drop empty arguments and do not
# escape embedded double quotes, which the docker finder's --format has.

Set-StrictMode -Version 2.0
$ErrorActionPreference = 'Stop'

$script:SelfPath = $PSCommandPath
if ([string]::IsNullOrEmpty($script:SelfPath)) {
    $script:SelfPath = $MyInvocation.MyCommand.Path
}
$script:RunIdForLog = '?'
$script:WordRegex = '\A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\z'

function Write-Log([string]$Message) {
    try {
        [Console]::Error.WriteLine(('rightsize watchdog [{0}]: {1}' -f $script:RunIdForLog, $Message))
    } catch {
        # A closed stderr must not stop the reaping.
    }
}

# Write-OutputLines shows a call's output under its log line, as the sh
# watchdog does: "    | " before each line.
function Write-OutputLines([string]$Output) {
    foreach ($line in $Output.Split([char]10)) {
        try {
            [Console]::Error.WriteLine(('    | {0}' -f $line.TrimEnd([char]13)))
        } catch {
        }
    }
}

# Remove-SelfCopy deletes this script's own file: each spawn runs a copy made
# for it alone (watchdog-<12 hex>-<pid>-<run>.ps1) that nothing else removes.
# A file not named so (the repository's own watchdog.ps1, run by hand) stays.
function Remove-SelfCopy {
    $path = $script:SelfPath
    if ([string]::IsNullOrEmpty($path)) {
        return
    }
    if ([IO.Path]::GetFileName($path) -notmatch '\Awatchdog-[0-9a-f]{12}-[0-9]+-.+\.ps1\z') {
        return
    }
    try {
        [IO.File]::Delete($path)
    } catch {
        Write-Log ('{0}: could not delete this script copy ({1})' -f $path, $_.Exception.Message)
    }
}

function Exit-Watchdog([int]$Code) {
    Remove-SelfCopy
    exit $Code
}

function Exit-Usage([string]$Message) {
    Write-Log $Message
    try {
        [Console]::Error.WriteLine('usage: watchdog.ps1 RUNS_DIR RUN_ID [KIND ROLE MODE GONE RETRY N WORD1 ... WORDN] ...')
    } catch {
    }
    Exit-Watchdog 2
}

# An error nothing expected: give up with the ledger as it is (the record
# stays for a later sweep), and still delete this copy.
trap {
    Write-Log ('unexpected error, giving up; the ledger is left as it is: {0}' -f $_)
    Exit-Watchdog 1
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
            if ([string]::IsNullOrEmpty($script:SelfPath) -or $candidate -ne [IO.Path]::GetFullPath($script:SelfPath)) {
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
    return ([IO.Path]::DirectorySeparatorChar -eq [char]'/' -and $Path.StartsWith('/', [StringComparison]::Ordinal))
}

# Test-Word: a word of the family's name grammar (ids and names alike).
function Test-Word([string]$Value) {
    return ($Value.Length -le 128 -and $Value -cmatch $script:WordRegex)
}

# Test-Flag: whether Attributes has Flag, compared as integers (no reliance on
# how PowerShell converts an enum to a boolean).
function Test-Flag([IO.FileAttributes]$Attributes, [IO.FileAttributes]$Flag) {
    return (([int]$Attributes -band [int]$Flag) -ne 0)
}

# Get-PathKind: absent | file | reparse (symbolic link, junction: never
# followed) | directory | unknown (cannot be inspected). Test-Path would
# follow links; the attributes do not.
function Get-PathKind([string]$Path) {
    try {
        $attributes = [IO.File]::GetAttributes($Path)
    } catch {
        $e = $_.Exception
        if ($e -is [Management.Automation.MethodInvocationException] -and $null -ne $e.InnerException) {
            $e = $e.InnerException
        }
        if ($e -is [IO.FileNotFoundException] -or $e -is [IO.DirectoryNotFoundException]) {
            return 'absent'
        }
        return 'unknown'
    }
    if (Test-Flag $attributes ([IO.FileAttributes]::ReparsePoint)) {
        return 'reparse'
    }
    if (Test-Flag $attributes ([IO.FileAttributes]::Directory)) {
        return 'directory'
    }
    return 'file'
}

# ---------------------------------------------------------------------------
# Arguments: everything is checked before waiting, so a caller that passes
# nonsense learns it at once (exit 2), not after it died.

$argv = [string[]]@(Get-ScriptArguments $args)
if ($argv.Length -lt 2) {
    Exit-Usage 'need RUNS_DIR and RUN_ID'
}
$runsDir = $argv[0]
$runId = $argv[1]
if ($runId -eq '' -or $runId.Contains('/') -or $runId.Contains('\') -or $runId.Contains(':') -or
    $runId.StartsWith('.', [StringComparison]::Ordinal) -or $runId.StartsWith('-', [StringComparison]::Ordinal)) {
    Exit-Usage ("refusing RUN_ID '{0}': empty, contains '/', '\' or ':', or starts with '.' or '-'" -f $runId)
}
$script:RunIdForLog = $runId
if (-not (Test-AbsolutePath $runsDir)) {
    Exit-Usage ("RUNS_DIR '{0}' is not an absolute path" -f $runsDir)
}

# Steps, and per kind whether it has a finder and the index of its last act
# step (the one that decides).
$script:Steps = New-Object 'System.Collections.Generic.List[object]'
$script:HasFinder = @{ sandboxes = $false; networks = $false }
$script:LastAct = @{ sandboxes = 0; networks = 0 }
$k = 2
$index = 0
while ($k -lt $argv.Length) {
    $index++
    if ($argv.Length - $k -lt 7) {
        Exit-Usage "step ${index}: need KIND ROLE MODE GONE RETRY N WORD1..."
    }
    $kind = $argv[$k]
    $role = $argv[$k + 1]
    $mode = $argv[$k + 2]
    if ($kind -cne 'sandboxes' -and $kind -cne 'networks') {
        Exit-Usage "step ${index}: KIND '$kind' is not sandboxes or networks"
    }
    if ($role -ceq 'find') {
        $script:HasFinder[$kind] = $true
    } elseif ($role -ceq 'act') {
        if ($mode -cne 'batch' -and $mode -cne 'each') {
            Exit-Usage "step ${index}: MODE '$mode' is not batch or each"
        }
        $script:LastAct[$kind] = $index
    } else {
        Exit-Usage "step ${index}: ROLE '$role' is not act or find"
    }
    if ($argv[$k + 5] -cnotmatch '\A[1-9][0-9]{0,2}\z') {
        Exit-Usage ("step ${index}: N '{0}' is not a number from 1 to 999" -f $argv[$k + 5])
    }
    $n = [int]$argv[$k + 5]
    if ($argv.Length - ($k + 6) -lt $n) {
        Exit-Usage ("step ${index}: N is $n but only {0} words follow" -f ($argv.Length - ($k + 6)))
    }
    $words = [string[]]@($argv[($k + 6)..($k + 5 + $n)])
    if (-not (Test-AbsolutePath $words[0])) {
        Exit-Usage ("step ${index}: program '{0}' is not an absolute path" -f $words[0])
    }
    [void]$script:Steps.Add(@{
            Index = $index
            Kind  = $kind
            Role  = $role
            Mode  = $mode
            Gone  = [string[]]@($argv[$k + 3].Split([char]10) | Where-Object { $_ -ne '' })
            Retry = [string[]]@($argv[$k + 4].Split([char]10) | Where-Object { $_ -ne '' })
            Words = $words
        })
    $k += 6 + $n
}

# An engine that takes the connection and never answers must not hold the
# watchdog, or its names, for ever: each call is bounded by
# RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds (a whole number from 1; default
# 120), then killed.
$script:CallTimeoutText = $env:RIGHTSIZE_WATCHDOG_CALL_TIMEOUT
if ($null -eq $script:CallTimeoutText -or $script:CallTimeoutText -cnotmatch '\A[1-9][0-9]*\z') {
    $script:CallTimeoutText = '120'
}
$script:CallTimeoutMs = [int]::MaxValue
if ($script:CallTimeoutText.Length -le 9) {
    $script:CallTimeoutMs = [int][Math]::Min([double]$script:CallTimeoutText * 1000, [double][int]::MaxValue)
}
$script:EngineHung = $false

# Do not pin the caller's working directory: on Windows it could then not be
# deleted while the watchdog waits.
$script:WorkDir = [Environment]::GetFolderPath('System')
try {
    Set-Location -LiteralPath $script:WorkDir
    [Environment]::CurrentDirectory = $script:WorkDir
} catch {
}

# ---------------------------------------------------------------------------
# Told ids: per kind an ordered set, ID -> "ID/NAME" ('/' is in neither
# grammar). Ordinal keys: ids differing in case are different ids. The sets
# are only ever used through methods, never through '.Key' member access,
# which PowerShell would resolve as a dictionary key.

$script:Told = @{
    sandboxes = (New-Object System.Collections.Specialized.OrderedDictionary ([StringComparer]::Ordinal))
    networks  = (New-Object System.Collections.Specialized.OrderedDictionary ([StringComparer]::Ordinal))
}

# Register-Line applies one line from the owner (without its newline): fields
# are separated by runs of spaces (only spaces), as sh's read with IFS=' '
# splits them; a missing NAME is the ID; fields after NAME are ignored.
function Register-Line([string]$Line) {
    $fields = $Line.Split([char[]]@([char]32), [StringSplitOptions]::RemoveEmptyEntries)
    if ($fields.Length -lt 1) {
        return
    }
    $op = $fields[0]
    if ($op -ceq '+s' -or $op -ceq '-s') {
        $kind = 'sandboxes'
    } elseif ($op -ceq '+n' -or $op -ceq '-n') {
        $kind = 'networks'
    } else {
        return
    }
    $id = ''
    if ($fields.Length -gt 1) {
        $id = $fields[1]
    }
    $name = ''
    if ($fields.Length -gt 2) {
        $name = $fields[2]
    }
    if ($name.Length -eq 0) {
        $name = $id
    }
    if (-not (Test-Word $id) -or -not (Test-Word $name)) {
        return
    }
    $set = $script:Told[$kind]
    $set.Remove($id)
    if ($op.StartsWith('+', [StringComparison]::Ordinal)) {
        $set.Add($id, ('{0}/{1}' -f $id, $name))
    }
}

function New-TokenList {
    return ,(New-Object 'System.Collections.Generic.List[string]')
}

function Get-ToldTokens([string]$Kind) {
    $list = New-TokenList
    foreach ($entry in $script:Told[$Kind].GetEnumerator()) {
        $list.Add([string]$entry.Value)
    }
    return ,$list
}

function Get-TokenId([string]$Token) {
    return $Token.Substring(0, $Token.IndexOf([char]'/'))
}

function Get-TokenName([string]$Token) {
    return $Token.Substring($Token.IndexOf([char]'/') + 1)
}

# ---------------------------------------------------------------------------
# Wait: read raw stdin to EOF, a fixed 4 KiB buffer at a time, applying each
# complete line. Bytes are decoded as ISO-8859-1, one character each, so that
# NUL and non-ASCII bytes stay visible to the (ASCII-only) grammar. A last
# line without its newline is ignored, as sh's read ignores it.

$latin1 = [Text.Encoding]::GetEncoding(28591)
$pending = New-Object Text.StringBuilder
$stdin = $null
try {
    $stdin = [Console]::OpenStandardInput()
} catch {
    Write-Log ('cannot open stdin ({0}); treating it as EOF' -f $_.Exception.Message)
}
if ($null -ne $stdin) {
    $buffer = New-Object byte[] 4096
    while ($true) {
        try {
            $count = $stdin.Read($buffer, 0, $buffer.Length)
        } catch {
            Write-Log ('reading stdin failed ({0}); treating it as EOF' -f $_.Exception.Message)
            $count = 0
        }
        if ($count -le 0) {
            break
        }
        $start = 0
        while ($start -lt $count) {
            $newline = [Array]::IndexOf($buffer, [byte]10, $start, $count - $start)
            if ($newline -lt 0) {
                [void]$pending.Append($latin1.GetString($buffer, $start, $count - $start))
                break
            }
            [void]$pending.Append($latin1.GetString($buffer, $start, $newline - $start))
            Register-Line $pending.ToString()
            $pending.Length = 0
            $start = $newline + 1
        }
    }
}
$pending.Length = 0

Write-Log "owner gone (stdin closed): reaping run $runId in $runsDir"

# [IO.Path]::Combine, not Join-Path: Join-Path fails on a drive PowerShell
# does not know.
$recordFile = [IO.Path]::Combine($runsDir, "$runId.json")
$ownRecordFile = [IO.Path]::Combine($runsDir, "$runId.gorecord")
$listFiles = @{
    sandboxes = [IO.Path]::Combine($runsDir, "$runId.sandboxes")
    networks  = [IO.Path]::Combine($runsDir, "$runId.networks")
}

# ---------------------------------------------------------------------------
# Calls.

# ConvertTo-NativeArgument quotes one argument for a Windows command line so
# that CommandLineToArgvW (and Go's and the C runtime's parsers) give it back
# as it is: empty, spaces, double quotes and backslashes before them included.
function ConvertTo-NativeArgument([string]$Value) {
    if ($Value.Length -eq 0) {
        return '""'
    }
    if ($Value.IndexOfAny([char[]]@([char]32, [char]9, [char]10, [char]11, [char]34)) -lt 0) {
        return $Value
    }
    $sb = New-Object Text.StringBuilder
    [void]$sb.Append([char]34)
    $slashes = 0
    foreach ($c in $Value.ToCharArray()) {
        if ($c -ceq [char]92) {
            $slashes++
            continue
        }
        if ($c -ceq [char]34) {
            # Backslashes before a quote are doubled, and the quote escaped.
            [void]$sb.Append([char]92, 2 * $slashes + 1)
        } elseif ($slashes -gt 0) {
            [void]$sb.Append([char]92, $slashes)
        }
        $slashes = 0
        [void]$sb.Append($c)
    }
    # Backslashes before the closing quote are doubled.
    if ($slashes -gt 0) {
        [void]$sb.Append([char]92, 2 * $slashes)
    }
    [void]$sb.Append([char]34)
    return $sb.ToString()
}

function Get-TaskText($Task) {
    try {
        if ($Task.IsCompleted) {
            return [string]$Task.Result
        }
    } catch {
    }
    return ''
}

# Invoke-Native runs the command once, with no stdin (closed at once, as sh's
# </dev/null), stdout and stderr captured (UTF-8), within the time bound.
# Returns @{ Code; Output (stdout, then stderr, trailing newlines dropped);
# TimedOut }. A program that cannot be started counts as exit 127.
function Invoke-Native([string[]]$Command) {
    $result = @{ Code = 127; Output = ''; TimedOut = $false }
    $quoted = New-Object 'System.Collections.Generic.List[string]'
    for ($i = 1; $i -lt $Command.Length; $i++) {
        $quoted.Add((ConvertTo-NativeArgument $Command[$i]))
    }
    $utf8 = New-Object Text.UTF8Encoding $false
    $psi = New-Object System.Diagnostics.ProcessStartInfo
    $psi.FileName = $Command[0]
    $psi.Arguments = [string]::Join(' ', $quoted.ToArray())
    $psi.UseShellExecute = $false
    $psi.CreateNoWindow = $true
    $psi.RedirectStandardInput = $true
    $psi.RedirectStandardOutput = $true
    $psi.RedirectStandardError = $true
    $psi.StandardOutputEncoding = $utf8
    $psi.StandardErrorEncoding = $utf8
    $psi.WorkingDirectory = $script:WorkDir
    $p = New-Object System.Diagnostics.Process
    $p.StartInfo = $psi
    try {
        [void]$p.Start()
    } catch {
        $e = $_.Exception
        if ($null -ne $e.InnerException) {
            $e = $e.InnerException
        }
        $result.Output = $e.Message
        return $result
    }
    try {
        try {
            $p.StandardInput.Close()
        } catch {
        }
        # Both streams are read at once, so that neither can fill and block
        # the program.
        $outTask = $p.StandardOutput.ReadToEndAsync()
        $errTask = $p.StandardError.ReadToEndAsync()
        $clock = [Diagnostics.Stopwatch]::StartNew()
        if (-not $p.WaitForExit($script:CallTimeoutMs)) {
            $result.TimedOut = $true
            try {
                $p.Kill()
            } catch {
            }
            [void]$p.WaitForExit(10000)
        }
        # The output ends when every holder of the pipes has closed them (a
        # child of the program may hold them too): that is bounded as well.
        $left = 10000
        if (-not $result.TimedOut) {
            $left = [int][Math]::Max(1000, [double]$script:CallTimeoutMs - $clock.ElapsedMilliseconds)
        }
        $tasks = [Threading.Tasks.Task[]]@($outTask, $errTask)
        $complete = $false
        try {
            $complete = [Threading.Tasks.Task]::WaitAll($tasks, $left)
        } catch {
            # A failed read: what was read is lost, the exit code still tells.
            $complete = $true
        }
        if (-not $complete) {
            $result.TimedOut = $true
        }
        if (-not $result.TimedOut) {
            $result.Code = $p.ExitCode
        }
        $crlf = [char[]]@([char]13, [char]10)
        $out = (Get-TaskText $outTask).TrimEnd($crlf)
        $err = (Get-TaskText $errTask).TrimEnd($crlf)
        if ($out.Length -gt 0 -and $err.Length -gt 0) {
            $result.Output = $out + "`n" + $err
        } else {
            $result.Output = $out + $err
        }
    } finally {
        $p.Dispose()
    }
    return $result
}

# Test-OutputHas: whether Output holds one of the fixed strings (ordinal,
# case-sensitive: the same bytes as sh's case pattern).
function Test-OutputHas([string]$Output, [string[]]$Patterns) {
    foreach ($pattern in $Patterns) {
        if ($pattern.Length -gt 0 -and $Output.IndexOf($pattern, [StringComparison]::Ordinal) -ge 0) {
            return $true
        }
    }
    return $false
}

# Get-CallResult classifies a call: ok | gone | retry | fail. A batch call is
# never "gone": its output cannot say which id is missing. A call stopped by
# the time bound fails and marks the engine as hung.
function Get-CallResult($Call, [string[]]$Gone, [string[]]$Retry, [bool]$Batch) {
    if ($Call.TimedOut) {
        $script:EngineHung = $true
        return 'fail'
    }
    if ($Call.Code -eq 0) {
        return 'ok'
    }
    if ($Call.Code -eq 126 -or $Call.Code -eq 127) {
        return 'fail'
    }
    if (-not $Batch -and (Test-OutputHas $Call.Output $Gone)) {
        return 'gone'
    }
    if (Test-OutputHas $Call.Output $Retry) {
        return 'retry'
    }
    return 'fail'
}

function Write-CallLog([string]$Label, [string]$What, $Call, [string]$Result) {
    if ($Call.TimedOut) {
        Write-Log ('{0} {1}: no answer within {2}s, stopped; later calls are skipped' -f $Label, $What, $script:CallTimeoutText)
    } else {
        Write-Log ('{0} {1}: exit {2} ({3})' -f $Label, $What, $Call.Code, $Result)
    }
    if (($Call.TimedOut -or $Call.Code -ne 0) -and $Call.Output.Length -gt 0) {
        Write-OutputLines $Call.Output
    }
}

# Invoke-Attempt: one call, and once more after 0.5 s if its output asked for
# a retry. Returns ok | gone | fail.
function Invoke-Attempt([string]$Label, [string]$What, $Step, [string[]]$Command, [bool]$Batch) {
    if ($script:EngineHung) {
        Write-Log ('{0} {1}: not tried, the engine did not answer an earlier call (fail)' -f $Label, $What)
        return 'fail'
    }
    $call = Invoke-Native $Command
    $result = Get-CallResult $call $Step.Gone $Step.Retry $Batch
    Write-CallLog $Label $What $call $result
    if ($result -ceq 'retry') {
        Start-Sleep -Milliseconds 500
        $call = Invoke-Native $Command
        $result = Get-CallResult $call $Step.Gone $Step.Retry $Batch
        if ($result -ceq 'retry') {
            $result = 'fail'
        }
        Write-CallLog $Label "$What (retry)" $call $result
    }
    return $result
}

# Invoke-Act acts on Set (tokens "ID/NAME") with the step's command: batch,
# then one id at a time if the batch failed (unless Quick: the first pass of
# a labelled kind, whose second pass decides anyway). Returns the tokens that
# failed.
function Invoke-Act($Step, [string]$Label, $Set, [bool]$Quick) {
    $failed = New-TokenList
    if ($Step.Mode -ceq 'batch') {
        $command = New-Object 'System.Collections.Generic.List[string]'
        $command.AddRange([string[]]$Step.Words)
        foreach ($token in $Set) {
            $command.Add((Get-TokenId $token))
        }
        $result = Invoke-Attempt $Label 'batch' $Step $command.ToArray() $true
        if ($result -ceq 'ok') {
            return ,$failed
        }
        if ($Quick) {
            foreach ($token in $Set) {
                $failed.Add($token)
            }
            return ,$failed
        }
        Write-Log ('{0}: the batch call failed; one at a time' -f $Label)
    }
    foreach ($token in $Set) {
        $command = [string[]]@($Step.Words + @(Get-TokenId $token))
        $result = Invoke-Attempt $Label (Get-TokenName $token) $Step $command $false
        if ($result -cne 'ok' -and $result -cne 'gone') {
            $failed.Add($token)
        }
    }
    return ,$failed
}

# Invoke-Finder runs a finder step; returns @{ Ok; Found (tokens) }. A line
# is "ID|NAME|MARK"; NAME loses one leading '/', an empty NAME is the ID; a
# line with a MARK, a NAME starting with rz-reuse- (keep-alive) or an id or
# name outside the grammar is not acted on.
function Invoke-Finder($Step, [string]$Label) {
    $found = New-TokenList
    if ($script:EngineHung) {
        Write-Log ('{0}: not tried, the engine did not answer an earlier call' -f $Label)
        return @{ Ok = $false; Found = $found }
    }
    $call = Invoke-Native $Step.Words
    $result = Get-CallResult $call ([string[]]@()) ([string[]]@()) $true
    Write-CallLog $Label 'finder' $call $result
    if ($result -cne 'ok') {
        return @{ Ok = $false; Found = $found }
    }
    foreach ($rawLine in $call.Output.Split([char]10)) {
        $line = $rawLine.TrimEnd([char]13)
        $parts = $line.Split([char[]]@([char]'|'), 3)
        $fid = $parts[0]
        $fname = ''
        $fmark = ''
        if ($parts.Length -gt 1) {
            $fname = $parts[1]
        }
        if ($parts.Length -gt 2) {
            $fmark = $parts[2]
        }
        if ($fid.Length -eq 0 -and $fname.Length -eq 0) {
            continue
        }
        if ($fname.StartsWith('/', [StringComparison]::Ordinal)) {
            $fname = $fname.Substring(1)
        }
        $name = $fname
        if ($name.Length -eq 0) {
            $name = $fid
        }
        if (-not (Test-Word $fid) -or -not (Test-Word $name)) {
            Write-Log 'finder: skipped a line that is not an id and a name'
            continue
        }
        if ($fname.StartsWith('rz-reuse-', [StringComparison]::Ordinal)) {
            continue
        }
        if ($fmark.Length -ne 0) {
            continue
        }
        $found.Add(('{0}/{1}' -f $fid, $name))
    }
    return @{ Ok = $true; Found = $found }
}

# Test-ProgramFile: a file, or a link to one (as sh's -f follows links: a
# program installed as a symbolic link, as WinGet does, is a program).
function Test-ProgramFile([string]$Path) {
    try {
        return [IO.File]::Exists($Path)
    } catch {
        return $false
    }
}

# What the first pass of a labelled kind failed to remove: its second pass
# acts on it too (a told id without the run's label would not be found).
$script:Again = @{ sandboxes = (New-TokenList); networks = (New-TokenList) }

# Invoke-Pass runs every step once. Pass 1 acts on the told sets; pass 2
# finds first for a labelled kind. Sets $script:Kept (tokens, for a kind
# without a finder) and $script:Clean per kind.
function Invoke-Pass([int]$Pass) {
    $script:Clean = @{ sandboxes = $true; networks = $true }
    $script:Kept = @{ sandboxes = (New-TokenList); networks = (New-TokenList) }
    $found = @{ sandboxes = (New-TokenList); networks = (New-TokenList) }
    foreach ($step in $script:Steps) {
        $kind = $step.Kind
        $label = 'pass {0} step {1} ({2} {3})' -f $Pass, $step.Index, $kind, $step.Role
        $labelled = [bool]$script:HasFinder[$kind]
        if (-not (Test-ProgramFile $step.Words[0])) {
            Write-Log ("{0}: program '{1}' is not an executable file" -f $label, $step.Words[0])
            $script:Clean[$kind] = $false
            if (-not $labelled) {
                $script:Kept[$kind] = Get-ToldTokens $kind
            }
            continue
        }
        if ($step.Role -ceq 'find') {
            if ($Pass -ne 2) {
                continue
            }
            $finder = Invoke-Finder $step $label
            if (-not $finder.Ok) {
                $script:Clean[$kind] = $false
            }
            $found[$kind] = $finder.Found
            continue
        }
        $quick = $false
        if ($labelled -and $Pass -eq 2) {
            $set = New-TokenList
            $ids = New-Object 'System.Collections.Generic.HashSet[string]' ([StringComparer]::Ordinal)
            foreach ($token in $found[$kind]) {
                $set.Add($token)
                [void]$ids.Add((Get-TokenId $token))
            }
            foreach ($token in $script:Again[$kind]) {
                if ($ids.Add((Get-TokenId $token))) {
                    $set.Add($token)
                }
            }
        } else {
            $set = Get-ToldTokens $kind
            $quick = $labelled
        }
        $failed = New-TokenList
        if ($set.Count -eq 0) {
            Write-Log ('{0}: nothing to act on' -f $label)
        } else {
            $failed = Invoke-Act $step $label $set $quick
        }
        if ($labelled) {
            if ($Pass -eq 2 -and $failed.Count -gt 0) {
                $script:Clean[$kind] = $false
            }
            if ($Pass -eq 1) {
                $script:Again[$kind] = $failed
            }
            continue
        }
        if ($step.Index -eq $script:LastAct[$kind]) {
            $script:Kept[$kind] = $failed
        }
    }
}

Invoke-Pass 1

# Then the second pass, RIGHTSIZE_WATCHDOG_SETTLE seconds later: a create the
# owner sent just before it died may be finished by the engine after the
# first pass.
$settle = $env:RIGHTSIZE_WATCHDOG_SETTLE
if ([string]::IsNullOrEmpty($settle) -or $settle -cnotmatch '\A[0-9.]+\z' -or $settle.StartsWith('.', [StringComparison]::Ordinal)) {
    $settle = '2'
}
if ($settle -ceq '0' -or $settle -ceq '0.0') {
    # No wait; a labelled kind still needs its finder to decide.
    if ($script:HasFinder['sandboxes'] -or $script:HasFinder['networks']) {
        Invoke-Pass 2
    }
} else {
    if (-not $script:EngineHung) {
        Write-Log "second pass in ${settle}s: a create sent just before the owner died may finish after the first"
        $seconds = 0.0
        $invariant = [Globalization.CultureInfo]::InvariantCulture
        if (-not [double]::TryParse($settle, [Globalization.NumberStyles]::AllowDecimalPoint, $invariant, [ref]$seconds)) {
            $seconds = 2.0
        }
        Start-Sleep -Milliseconds ([int][Math]::Min($seconds * 1000, [double][int]::MaxValue))
    }
    Invoke-Pass 2
}

# A kind no step acts on keeps what it was told.
foreach ($kind in @('sandboxes', 'networks')) {
    $told = Get-ToldTokens $kind
    if ($script:LastAct[$kind] -eq 0 -and $told.Count -gt 0) {
        $script:Clean[$kind] = $false
        $script:Kept[$kind] = $told
        Write-Log ('no step for {0}: every {1} is kept' -f $kind, @{ sandboxes = 'sandbox'; networks = 'network' }[$kind])
    }
}
if ($script:EngineHung) {
    $script:Clean['sandboxes'] = $false
    $script:Clean['networks'] = $false
}

# ---------------------------------------------------------------------------
# Ledger files.

# Remove-LedgerFile deletes Path as rm -f would: a file, or the link itself
# for a reparse point (never what it points to); absent is fine; a real
# directory stays.
function Remove-LedgerFile([string]$Path) {
    $what = Get-PathKind $Path
    try {
        switch ($what) {
            'absent' {
                return
            }
            'file' {
                $attributes = [IO.File]::GetAttributes($Path)
                if (Test-Flag $attributes ([IO.FileAttributes]::ReadOnly)) {
                    [IO.File]::SetAttributes($Path, [IO.FileAttributes]([int]$attributes -band (-bnot [int][IO.FileAttributes]::ReadOnly)))
                }
                [IO.File]::Delete($Path)
            }
            'reparse' {
                if (Test-Flag ([IO.File]::GetAttributes($Path)) ([IO.FileAttributes]::Directory)) {
                    [IO.Directory]::Delete($Path, $false)
                } else {
                    [IO.File]::Delete($Path)
                }
            }
            default {
                Write-Log ('{0}: not a file ({1}): not deleted' -f $Path, $what)
            }
        }
    } catch {
        Write-Log ('{0}: could not delete it ({1})' -f $Path, $_.Exception.Message)
    }
}

$keptCount = $script:Kept['sandboxes'].Count + $script:Kept['networks'].Count
if ($script:Clean['sandboxes'] -and $script:Clean['networks'] -and $keptCount -eq 0) {
    # Line files before the record: a reader never sees names without a record.
    Remove-LedgerFile $listFiles['sandboxes']
    Remove-LedgerFile $listFiles['networks']
    Remove-LedgerFile $recordFile
    Remove-LedgerFile $ownRecordFile
    Write-Log 'everything removed; ledger files deleted'
    Exit-Watchdog 0
}

# Write-NameList replaces Path, when it is a regular file (never through a
# reparse point), with the names of Tokens, one per line, via a temporary file
# in the same folder created exclusively (never written through something
# planted at its name): File.Replace swaps it in; File.Move with overwrite
# (PowerShell 7), then Move-Item -Force, are the fallbacks.
function Write-NameList([string]$Path, $Tokens) {
    if ((Get-PathKind $Path) -cne 'file') {
        return
    }
    $tmp = [IO.Path]::Combine($runsDir, ('.{0}.tmp.{1}' -f [IO.Path]::GetFileName($Path), $PID))
    $text = New-Object Text.StringBuilder
    foreach ($token in $Tokens) {
        [void]$text.Append((Get-TokenName $token)).Append([char]10)
    }
    try {
        Remove-LedgerFile $tmp
        $bytes = [Text.Encoding]::ASCII.GetBytes($text.ToString())
        $stream = [IO.File]::Open($tmp, [IO.FileMode]::CreateNew, [IO.FileAccess]::Write, [IO.FileShare]::None)
        try {
            $stream.Write($bytes, 0, $bytes.Length)
            $stream.Flush()
        } finally {
            $stream.Dispose()
        }
        try {
            [IO.File]::Replace($tmp, $Path, [NullString]::Value)
        } catch {
            $move = [IO.File].GetMethod('Move', [Type[]]@([string], [string], [bool]))
            if ($null -ne $move) {
                [IO.File]::Move($tmp, $Path, $true)
            } else {
                Move-Item -LiteralPath $tmp -Destination $Path -Force
            }
        }
        Write-Log ('{0}: rewritten with what is kept' -f $Path)
    } catch {
        Write-Log ('{0}: could not rewrite it ({1}); left as it was' -f $Path, $_.Exception.Message)
        Remove-LedgerFile $tmp
    }
}

# A labelled kind's list stays as it is: a superset of what lives, which the
# next sweep checks against the labels. Another kind's keeps what failed.
foreach ($kind in @('sandboxes', 'networks')) {
    if (-not $script:HasFinder[$kind] -and $script:LastAct[$kind] -ne 0 -and $script:Clean[$kind]) {
        Write-NameList $listFiles[$kind] $script:Kept[$kind]
    }
}
Write-Log "something was kept; $recordFile stays for a later sweep"
Exit-Watchdog 0
