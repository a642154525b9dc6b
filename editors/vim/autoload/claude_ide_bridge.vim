vim9script
# claude-ide-bridge for Vim: the bridge process (`claude-ide-bridge serve --stdio`), its JSON-lines
# protocol (docs/stdio.md in the claude-ide-bridge repository) and the entry points of the commands.
# See :help claude-ide-bridge.

import autoload 'claude_ide_bridge/context.vim'
import autoload 'claude_ide_bridge/diff.vim'
import autoload 'claude_ide_bridge/files.vim'
import autoload 'claude_ide_bridge/remote.vim'
import autoload 'claude_ide_bridge/terminal.vim'

var job: job = null_job
var port = 0
# Where claude connects to the bridge (the `ready` line's `host`): 127.0.0.1 unless it listens
# elsewhere (--host).
var claude_host = '127.0.0.1'
var lock_file = ''
var folders: list<string> = []
var clients: dict<dict<any>> = {}
var waiting: list<any> = []
var stderr_tail: list<string> = []
# When the last of them came: a transport's last words come as it ends; the bridge's own log
# lines (a client connected) may be much older, and say nothing of the end.
var stderr_last_at = reltime()
# How close to the end that must be for the line to be taken as the transport's (seconds).
const LAST_WORDS = 1.0
# The bridge's exit status once it exited (`null` before: a signal's status is negative too), and
# whether its output was read to the end.
var exited: any = null
var closed = false
var last_error = ''
var stopping = false
# A start asked for while the bridge was stopping: done once it ended, then these are called.
var restart = false
var restart_then: list<any> = []
# Stopped by :ClaudeCodeStop (or Vim leaving), not ended on its own: not started again by
# :ClaudeCode under a running claude.
var stopped_by_user = false
# Why the last bridge ended without being asked to (for :ClaudeCodeStatus), or ''.
var ended_why = ''
var unanswered: dict<string> = {}
# Remote: the timer that sends a keepalive line, the keepalive ticks since the one asked without
# an answer, that is without a byte from the bridge (-1: none waits), and whether Vim dropped the
# link for want of one.
var keepalive_timer = 0
const KEEPALIVES_MISSED = 4
var keepalive_missed = -1
var went_silent = false
# ids of tool calls that wait for Vim to leave the command line; claude may withdraw them meanwhile
var deferred: dict<bool> = {}

# ---- options and messages ----

# The value of g:claude_ide_bridge_{name}, or `default`.
export def Option(name: string, default: any): any
  return get(g:, 'claude_ide_bridge_' .. name, default)
enddef

# Reports an error once: the same message again is not repeated until another one was shown, or
# until the user runs a command again (Fresh).
export def Error(msg: string)
  if msg ==# last_error
    return
  endif
  last_error = msg
  echohl ErrorMsg
  echomsg 'claude-ide-bridge: ' .. msg
  echohl None
enddef

# A command the user typed: its errors are shown even when they were the last ones shown.
export def Fresh()
  last_error = ''
enddef

export def Info(msg: string)
  echomsg 'claude-ide-bridge: ' .. msg
enddef

# ---- the bridge process ----

export def Running(): bool
  return job_status(job) ==# 'run' && port > 0 && !stopping
enddef

# Whether the bridge was stopped by the user (:ClaudeCodeStop) rather than ending on its own.
export def StoppedByUser(): bool
  return stopped_by_user
enddef

# Started, and not ready yet.
export def Starting(): bool
  return job_status(job) ==# 'run' && port == 0
enddef

export def Port(): number
  return port
enddef

export def ClaudeHost(): string
  return claude_host
enddef

export def Folders(): list<string>
  return folders
enddef

export def Connected(): bool
  return !empty(filter(values(clients), (_, c) => c.initialized))
enddef

# A full path without its last separators (`/`, and on Windows `\` too), but for a root (`/`,
# `C:\`), which keeps one.
def Unslashed(full: string): string
  if full =~# '^\a:[\\/]\+$'
    return full[: 2]
  endif
  var cut = substitute(full, has('win32') ? '[\\/]\+$' : '/\+$', '', '')
  return cut ==# '' ? full[0] : cut
enddef

# The full path of a file's name as Vim gives it (bufname(), <afile>: relative to the current
# folder, or full). A leading `~` there is the name's own (a `~` the user typed was expanded
# then): fnamemodify(':p') alone would take it for a home folder (`~x.txt` stayed relative, `~`
# became $HOME).
export def FullName(name: string): string
  return fnamemodify(name =~# '^\~' ? './' .. name : name, ':p')
enddef

# A folder the user wrote, as a full path without its last separator; `~` and `$VAR` in it
# expanded, nothing else (expand() would read `[...]` or `{a,b}` in a name as patterns).
export def FullFolder(d: string): string
  return Unslashed(fnamemodify(d =~# '^\~\|\$' ? expand(d) : d, ':p'))
enddef

# Whether the full path `path` is the folder `folder` (a FullFolder) or below it: `/` after it,
# or on Windows `\` too, where names are compared ignoring case.
export def Below(path: string, folder: string): bool
  var [p, f] = has('win32') ? [tolower(path), tolower(folder)] : [path, folder]
  if p ==# f
    return true
  endif
  if stridx(p, f) != 0
    return false
  endif
  var after = strpart(p, strlen(f), 1)
  return f =~# '[\\/]$' || after ==# '/' || (has('win32') && after ==# '\')
enddef

def WorkspaceFolders(): list<string>
  var w = Option('workspace', [])
  var list = type(w) == v:t_list ? copy(w) : [w]
  if empty(list)
    # as it is: expand() would read `$`, `[...]` or `{a,b}` in a directory's name as patterns
    return [Unslashed(fnamemodify(getcwd(), ':p'))]
  endif
  return map(list, (_, d) => FullFolder(d))
enddef

# Starts the bridge unless it runs; `Then` (a function without arguments, or 0) is called once it
# is ready (at once when it already is). Returns false when it could not start.
export def Start(Then: any = 0): bool
  stopped_by_user = false
  if job_status(job) ==# 'run' && stopping
    # told to stop and not ended yet (`:ClaudeCodeStop | ClaudeCodeStart`): started again once
    # it ended (Ended)
    restart = true
    if type(Then) == v:t_func
      add(restart_then, Then)
    endif
    return true
  endif
  if job_status(job) ==# 'run'
    if type(Then) == v:t_func
      if port > 0
        Then()
      else
        add(waiting, Then)
      endif
    endif
    return true
  endif
  if &encoding !=# 'utf-8'
    # json_decode() would turn what Vim cannot hold in its encoding into `?`, and an accepted
    # proposal would be written so
    Error('Vim''s ''encoding'' is ' .. &encoding .. ', not utf-8: claude''s text would be damaged.'
      .. ' Put `set encoding=utf-8` at the top of your vimrc (:help claude-ide-bridge-install)')
    return false
  endif
  var argv: list<string>
  var serve: list<string>
  if remote.On()
    # the bridge runs on the other side of the transport (:help claude-ide-bridge-remote)
    var local = WorkspaceFolders()
    var problem = remote.Problem()
    if problem ==# ''
      problem = remote.WorkspaceProblem(local)
    endif
    if problem !=# ''
      Error(problem)
      return false
    endif
    folders = remote.Workspace(local)
  else
    var cmd = Option('cmd', 'claude-ide-bridge')
    argv = type(cmd) == v:t_list ? copy(cmd) : [cmd]
    if !executable(argv[0])
      Error(argv[0] .. ' was not found: install it (:help claude-ide-bridge-install) or set g:claude_ide_bridge_cmd')
      return false
    endif
    folders = WorkspaceFolders()
  endif
  serve = ['serve', '--stdio', '--ide-name', Option('ide_name', 'Vim')]
  for f in folders
    serve += ['--workspace', f]
  endfor
  serve += Option('args', [])
  if remote.On()
    serve += remote.KeepaliveArgs()
  endif
  argv = remote.On() ? remote.BridgeCommand(serve) : argv + serve
  port = 0
  lock_file = ''
  clients = {}
  stderr_tail = []
  last_error = ''
  stopping = false
  ended_why = ''
  [keepalive_missed, went_silent] = [-1, false]
  [exited, closed] = [null, false]
  [partial, partial_bytes, overlong, unhandled] = [[], 0, false, []]
  waiting = type(Then) == v:t_func ? [Then] : []
  job = job_start(argv, {
    in_mode: 'raw',
    # read as it comes and split into lines here (OnOutput), not by Vim ('nl'): Vim shows no part
    # of a line, and a long one crossing a slow link looked like a link gone silent
    out_mode: 'raw', out_cb: (_, chunk) => OnOutput(chunk),
    err_mode: 'nl', err_cb: (_, line) => OnStderr(line),
    # (a last line without its newline is one too, as Vim's 'nl' mode took it)
    close_cb: (_) => {
      OnOutputEnd()
      OnClosed()
    },
    exit_cb: (_, status) => OnExit(status),
    stoponexit: 'term',
    # Writes the pipe cannot take now wait in Vim's queue: a blocked write would stop Vim from
    # reading the bridge, while the bridge, its output unread, reads no more lines (a deadlock).
    noblock: true,
  })
  if job_status(job) !=# 'run'
    Error('could not start ' .. join(argv))
    return false
  endif
  augroup claude_ide_bridge_exit
    autocmd!
    autocmd VimLeavePre * Leaving()
  augroup END
  if remote.On()
    # A transport that hangs before the bridge is ready (a host that does not answer, a network
    # gone: ssh may wait minutes, or for good) is said, not waited on in silence.
    var started = job
    var every = remote.Keepalive()
    var after = every <= 0 ? 15.0 : every < 1.0 ? 1.0 : every
    timer_start(float2nr(1000 * after), (_) => {
      if started == job && Starting() && !stopping
        Error('still waiting for `' .. remote.Describe() .. '` to start the bridge over there ('
          .. printf('%g', after) .. ' s): is the host reachable? :ClaudeCodeStop gives up')
      endif
    })
  endif
  return true
enddef

# Vim quits: what the command that quits it decided is sent (`:xa` accepts the pending diffs),
# then the bridge stops: its input closes, and on Unix Vim sends it SIGTERM as it exits. The
# bridge handles the lines written before the signal first (docs/stdio.md), so a decision sent
# here, or by `:wq` in the last window, reaches claude; and the signal stops it even when a
# process Vim started since holds its input open. On Windows "term" is TerminateProcess, which
# would lose those lines and leave the lock file; nothing else holds the input open there (Vim
# makes its end uninheritable), so its end alone stops the bridge.
#
# Remote, Vim's signal would reach the transport (ssh, docker exec), not the bridge, and the
# transport drops what it has not forwarded yet: `:xa`'s accepts, and the user's edits in them,
# were lost so in 2 to 4 quits of 20. Its input closed, the transport is given up to 2 s to
# forward the lines and end with the bridge before Vim goes on quitting.
def Leaving()
  diff.QuittingAll()
  if has('win32') && job_status(job) ==# 'run'
    job_setoptions(job, {stoponexit: ''})
  endif
  var through_transport = remote.On() && job_status(job) ==# 'run'
  Stop()
  if through_transport
    var start = reltime()
    while job_status(job) ==# 'run' && reltimefloat(reltime(start)) < 2.0
      sleep 20m
    endwhile
  endif
enddef

# Stops the bridge: its input closes, and it answers claude's pending calls (the diffs too) with
# a tool error, removes its lock file and exits. A start queued while it was stopping is dropped.
export def Stop()
  restart = false
  restart_then = []
  stopped_by_user = true
  if job_status(job) ==# 'run'
    stopping = true
    ch_close_in(job_getchannel(job))
    if remote.On()
      # A transport stuck on a dead link does not end when its input closes (it cannot forward
      # the end): killed once it had STOP_GRACE seconds (the bridge over there sees the link end
      # either way), so that the stop ends and a start queued behind it runs.
      var stopped = job
      timer_start(STOP_GRACE * 1000, (_) => {
        if stopped == job && job_status(stopped) ==# 'run'
          job_stop(stopped, 'kill')
        endif
      })
    endif
  endif
enddef
const STOP_GRACE = 3

# With g:claude_ide_bridge_log set to a file name, every line to and from the bridge is appended
# to that file.
def Log(dir: string, line: string)
  var file = Option('log', '')
  if file !=# ''
    writefile([strftime('%H:%M:%S ') .. dir .. ' ' .. line], file, 'a')
  endif
enddef

# Sends a message; whether it went out (see SendLine).
export def Send(msg: dict<any>): bool
  return SendLine(json_encode(msg))
enddef

# Sends a line of JSON (without its line break); whether it went out: not to a bridge that is
# stopping or gone (a decision the caller cannot give then, with what the user wrote in it).
export def SendLine(line: string): bool
  # Not once stopping: its input is closed while it winds down (E630 from a timer otherwise).
  if job_status(job) !=# 'run' || stopping
    return false
  endif
  Log('->', line)
  try
    ch_sendraw(job_getchannel(job), line .. "\n")
  catch
    # The pipe broke before Vim saw the job end (a transport that dropped): the end is told
    # once its status is known (Ended), not as a raw write error now.
    Log('!!', v:exception)
    return false
  endtry
  return true
enddef

# Answers a tool call: {text: ...}, {error: ...} or {result: ...}.
export def Respond(id: number, answer: dict<any>)
  Send(extend({type: 'respond', id: id}, answer))
enddef

export def RespondJson(id: number, value: any)
  Respond(id, {text: json_encode(value)})
enddef

def OnStderr(line: string)
  Log('stderr', line)
  add(stderr_tail, line)
  stderr_last_at = reltime()
  if len(stderr_tail) > 30
    remove(stderr_tail, 0)
  endif
enddef

# The bridge's end is handled once its status is known and its output read to the end: the exit
# callback may come before the last stderr lines (the reason a bridge gives for not starting),
# the close callback comes after them. A close that never comes is waited for 200 ms at most.
def OnExit(status: number)
  exited = status
  if closed
    Ended(status)
  else
    var ended = job
    timer_start(200, (_) => ClosedLate(ended))
  endif
enddef

# The wait for the close is over: unless another bridge was started meanwhile.
def ClosedLate(ended: job)
  if ended == job
    OnClosed()
  endif
enddef

def OnClosed()
  if closed
    return
  endif
  closed = true
  if exited != null
    Ended(exited)
  endif
enddef

def Ended(status: number)
  var was_ready = port > 0
  timer_stop(keepalive_timer)
  port = 0
  clients = {}
  waiting = []
  deferred = {}
  # (an accept the user edited, sent just before a bridge that ends unasked, is kept)
  var unsure = stopping ? [] : diff.KeepSent()
  diff.ForgetSent()
  context.Detach()
  if stopping
    diff.CloseAll((kept) => {
      if !empty(kept)
        Info('the bridge stopped with changes pending: your edits of the proposals are kept in: '
          .. join(kept, ', '))
      endif
    })
  else
    # Not asked to end: the diffs close unanswered (a bridge that stops answers claude for them)
    # and a proposal the user edited stays in a buffer of its own.
    var closed_diffs = len(diff.Pending())
    # the bridge's reason: its error line (clap ends with a hint about --help); not another log
    # line, which has nothing to do with the end (a bridge killed says nothing)
    var errors = filter(copy(stderr_tail), (_, l) => l =~? '^\s*error')
    var why = !empty(errors) ? ': ' .. errors[0] : ''
    ended_why = went_silent ? remote.Silent(KEEPALIVES_MISSED * remote.Keepalive(), closed_diffs)
      : remote.On() ? remote.Why(status, stderr_tail, was_ready, closed_diffs,
          reltimefloat(reltime(stderr_last_at)) < LAST_WORDS) : ''
    if ended_why ==# ''
      ended_why = (remote.On() ? 'the remote bridge (`' .. remote.Describe() .. '`)' : 'the bridge')
        .. ' exited with status ' .. status .. (was_ready ? '' : ' before it was ready') .. why
        .. (remote.On() ? '' : status == 2
          ? ' (its arguments were refused: see g:claude_ide_bridge_args and g:claude_ide_bridge_cmd)'
          : ' (see :ClaudeCodeStatus, and run `claude-ide-bridge doctor`)')
    endif
    # said once the diffs are closed, which waits while the user types (diff.CloseWhenFree), with
    # the buffers that keep their edits
    var said = ended_why
    var stamped = strftime('%H:%M:%S ') .. ended_why
    ended_why = stamped
    diff.CloseUnanswered((kept) => {
      var full = said .. (empty(kept) ? '' : '. Your edits of the proposals are kept in: ' .. join(kept, ', '))
        .. (empty(unsure) ? '' : '. Your accept of an edited proposal may not have reached claude'
        .. ' (its terminal shows whether it wrote it): your edit is kept in: ' .. join(unsure, ', '))
      Error(full)
      # (unless another bridge ended meanwhile)
      if ended_why ==# stamped
        ended_why = strftime('%H:%M:%S ') .. full
      endif
    })
  endif
  stopping = false
  if restart
    restart = false
    var todo = restart_then
    restart_then = []
    if Start()
      waiting += todo
    endif
  endif
enddef

# Remote, every keepalive: a `status` line to the bridge over there, unless one is still
# unanswered; when nothing came back for KEEPALIVES_MISSED more, the link is taken as gone and the
# transport killed (its end is then handled as any drop: Ended). Any bytes from the bridge are an
# answer, a part of a line too (OnOutput): the answer waits behind the lines before it, and a
# diff of 10 MB takes minutes to cross a slow link, which is working all that time. Counted in
# ticks of the timer, which does not run while Vim is suspended: back from Ctrl-Z, the answer read
# meanwhile is not taken for silence.
def KeepAlive()
  if !Running()
    return
  endif
  if keepalive_missed < 0
    keepalive_missed = 0
    Send({type: 'status'})
  else
    keepalive_missed += 1
    if keepalive_missed >= KEEPALIVES_MISSED
      went_silent = true
      job_stop(job, 'kill')
    endif
  endif
enddef

# ---- the bridge's lines ----

# The bridge's output is read as it comes (out_mode 'raw') and split into lines here, so that a
# part of a line is seen: the bytes of a long line (a proposal of 10 MB over a slow link) keep the
# link alive while the line crosses (KeepAlive). Each line reaches OnLine as Vim's 'nl' mode gave
# it: without its newline, nor a CR before it; a NUL read as a NL (Vim's way in both modes: a NUL
# byte in a line of the bridge, which JSON never holds, now ends it). A partial line waits in
# `partial`, in pieces joined once its newline comes (each chunk appended to a string would copy
# the line again each time: gigabytes for 10 MB coming in small chunks). One longer than MAX_LINE (64 MiB, the bridge's
# own limit for the editor's lines; its lines are at most about 10 MiB, claude's largest message)
# is not kept: Vim's memory grew without limit with one endless line. It is dropped until its end,
# said once.
const MAX_LINE = 64 * 1024 * 1024
var partial: list<string> = []
var partial_bytes = 0
var overlong = false
# Complete lines not handled yet, oldest first: a line's handling may let Vim read more of the
# bridge (a prompt, a `sleep`), whose lines must not overtake the ones before them: the inner
# call handles the older ones first.
var unhandled: list<string> = []

def OnOutput(chunk: string)
  if chunk ==# ''
    return
  endif
  # (bytes: the link carries them, and the bridge is there)
  keepalive_missed = -1
  var pieces = split(chunk, "\n", true)
  # the last piece has no newline yet ('' when the chunk ended with one)
  var rest = remove(pieces, -1)
  for piece in pieces
    if overlong || partial_bytes + strlen(piece) > MAX_LINE
      # the end of a line too long (said when it went past the limit)
      if !overlong
        Overlong()
      endif
      [partial, partial_bytes, overlong] = [[], 0, false]
      continue
    endif
    var line = empty(partial) ? piece : join(add(partial, piece), '')
    [partial, partial_bytes] = [[], 0]
    # (bytes, not characters: a line's last character counted from its start is slow)
    var n = strlen(line)
    add(unhandled, n > 0 && strpart(line, n - 1) ==# "\r" ? strpart(line, 0, n - 1) : line)
  endfor
  if rest !=# '' && !overlong
    if partial_bytes + strlen(rest) > MAX_LINE
      Overlong()
      [partial, partial_bytes, overlong] = [[], 0, true]
    else
      add(partial, rest)
      partial_bytes += strlen(rest)
    endif
  endif
  HandleLines()
enddef

# The bridge's output ended: a last line without its newline is handled as one, as Vim's 'nl'
# mode did (a half line of a transport that died: reported as a line Vim cannot read).
def OnOutputEnd()
  if !empty(partial) && !overlong
    add(unhandled, join(partial, ''))
  endif
  [partial, partial_bytes, overlong] = [[], 0, false]
  HandleLines()
enddef

def Overlong()
  Report('the bridge sent a line longer than ' .. (MAX_LINE / 1024 / 1024) .. ' MiB: Vim dropped it'
    .. ' (a damaged link, or a bridge of another version?)')
enddef

def HandleLines()
  while !empty(unhandled)
    var line = remove(unhandled, 0)
    try
      OnLine(line)
    catch
      # (a bug: the lines after it are still handled)
      Report('handling a line from the bridge failed: ' .. v:exception .. ' (' .. v:throwpoint .. ')')
    endtry
  endwhile
enddef

# Messages about the bridge's lines (its refusals, lines Vim cannot read) come as fast as it
# writes them, and a burst of them filled the screen with a -- More -- prompt that took the
# user's keys: one a second is shown, the others only logged (g:claude_ide_bridge_log), and how
# many were not shown is said a second later.
var reported_at = 0.0
var unreported = 0

def Report(msg: string)
  Log('!!', msg)
  var now = reltimefloat(reltime())
  if now - reported_at < 1.0
    unreported += 1
    if unreported == 1
      timer_start(1000, (_) => ReportUnreported())
    endif
    return
  endif
  reported_at = now
  Error(msg)
enddef

def ReportUnreported()
  var n = unreported
  unreported = 0
  reported_at = reltimefloat(reltime())
  var log = Option('log', '')
  Error(n .. ' more message(s) about the bridge''s lines not shown'
    .. (log !=# '' ? ': see ' .. log : ' (g:claude_ide_bridge_log keeps them)'))
enddef

# At most `max` characters of `text`, then `...`.
def Cut(text: string, max: number): string
  return strchars(text) > max ? strcharpart(text, 0, max) .. '...' : text
enddef

# The members the plugin reads of each line from the bridge, and the types they may have
# (v:t_none: null); `?` after a name: it may be missing. A line without them (a bridge of another
# version, a link that damaged it) is reported, not read: reading it raised Vim's errors, a stack
# of them with a prompt. Other types and members are passed over (a later bridge's).
const MEMBERS = {
  ready: {port: [v:t_number], 'host?': [v:t_string], 'lockFile?': [v:t_string, v:t_none]},
  connected: {conn: [v:t_number]},
  initialized: {conn: [v:t_number], protocolVersion: [v:t_string]},
  disconnected: {conn: [v:t_number]},
  tool_call: {id: [v:t_number], name: [v:t_string], 'arguments?': [v:t_dict]},
  cancelled: {id: [v:t_number], 'reason?': [v:t_string]},
  status: {'clients?': [v:t_list], 'pending?': [v:t_list]},
  error: {message: [v:t_string]},
}

def Readable(msg: any): bool
  if type(msg) != v:t_dict || type(get(msg, 'type')) != v:t_string
    return false
  endif
  for [name, types] in items(get(MEMBERS, msg.type, {}))
    var key = substitute(name, '?$', '', '')
    if !has_key(msg, key) ? key ==# name : index(types, type(msg[key])) < 0
      return false
    endif
  endfor
  if msg.type ==# 'status'
    # (ShowStatus reads their items' members with get())
    return empty(filter(get(msg, 'clients', []) + get(msg, 'pending', []),
      (_, x) => type(x) != v:t_dict))
  endif
  return msg.type !=# 'ready' || msg.port > 0
enddef

# A NUL of JSON, `\u0000`: not the `u0000` after an escaped backslash (`\\u0000`).
const NUL_ESCAPE = '\\\@<!\%(\\\\\)*\zs\\u0000'
# What a NUL is read as first (a noncharacter, never in a text claude edits).
const NUL_STANDIN = "\ufdd0"

# Vim's json_decode() drops a NUL (`\u0000`): a proposal holding some was shown without them,
# and sent back so once edited. In a proposal (openDiff's `new_file_contents`) each is read as
# NUL_STANDIN, unless the line holds one already, and shown as Vim holds a NUL in a line, a NL
# (diff.Open). Returns the decoded line (0 when it is not JSON) and what became of its NULs:
# '' (none), 'kept' (as NUL_STANDIN), 'lost' (dropped).
def Decode(line: string): list<any>
  var nul = ''
  var msg: any
  try
    # (stridx first: the pattern takes 30 times as long on a line of megabytes)
    if stridx(line, 'u0000') >= 0 && line =~# NUL_ESCAPE
      nul = stridx(line, NUL_STANDIN) < 0 && line !~? '\\ufdd0' ? 'kept' : 'lost'
      if nul ==# 'kept'
        msg = json_decode(substitute(line, NUL_ESCAPE, '\\ufdd0', 'g'))
        if type(msg) == v:t_dict && [get(msg, 'type', ''), get(msg, 'name', '')] == ['tool_call', 'openDiff']
          return [msg, nul]
        endif
      endif
      # (elsewhere, as before: a NUL cannot be in a path, and a message is only said)
      nul = 'lost'
    endif
    msg = json_decode(line)
  catch
  endtry
  return [msg, nul]
enddef

def OnLine(line: string)
  Log('<-', line)
  keepalive_missed = -1
  if line =~# '^\s*$'
    return
  endif
  var [msg, nul] = Decode(line)
  if !Readable(msg) && port == 0 && remote.On() && line !~# '^\s*{'
    # Before the bridge is ready, what the login shell over there wrote to its output (a
    # ~/.bashrc setting the terminal's title, a banner) comes first, and without a line break it
    # is glued to the `ready` line: that line is read from its first `{"` (a title may hold a
    # `{`), what is before it said. A line that is JSON from its start is the bridge's.
    var at = stridx(line, '{"')
    var junk = at < 0 ? line : strpart(line, 0, at)
    Report('the shell over there (`' .. remote.Describe() .. '`) wrote this before the bridge'
      .. ' started (a ~/.bashrc or profile that prints? It should print nothing when not'
      .. ' interactive); passed over: ' .. Cut(strtrans(junk), 200))
    if at < 0
      return
    endif
    [msg, nul] = Decode(strpart(line, at))
  endif
  if !Readable(msg)
    Report('the bridge sent a line Vim cannot read (is it another version than the plugin?): '
      .. Cut(line, 200))
    return
  endif
  var kind = msg.type
  if kind ==# 'ready'
    port = msg.port
    # (a bridge older than the `host` member: 127.0.0.1)
    claude_host = get(msg, 'host', '127.0.0.1')
    lock_file = type(get(msg, 'lockFile')) == v:t_string ? msg.lockFile : ''
    if remote.On() && remote.Keepalive() > 0
      var every = float2nr(ceil(1000 * remote.Keepalive()))
      keepalive_timer = timer_start(every, (_) => KeepAlive(), {repeat: -1})
    endif
    context.Attach()
    files.WatchDisk()
    var todo = waiting
    waiting = []
    for F in todo
      F()
    endfor
  elseif kind ==# 'connected'
    clients[string(msg.conn)] = {initialized: false, protocolVersion: ''}
  elseif kind ==# 'initialized'
    clients[string(msg.conn)] = {initialized: true, protocolVersion: msg.protocolVersion}
    context.Resend()
  elseif kind ==# 'disconnected'
    # also for a connection refused before it was reported (a wrong token, a stale lock file)
    if has_key(clients, string(msg.conn))
      remove(clients, string(msg.conn))
    endif
  elseif kind ==# 'tool_call'
    OnToolCall(msg, nul)
  elseif kind ==# 'cancelled'
    if has_key(unanswered, string(msg.id))
      remove(unanswered, string(msg.id))
    endif
    if has_key(deferred, string(msg.id))
      remove(deferred, string(msg.id))
    endif
    diff.Cancel(msg.id, get(msg, 'reason', ''))
  elseif kind ==# 'status'
    status_answer = msg
    status_asked = false
  elseif kind ==# 'error'
    if status_asked && msg.message =~# '^unknown message type "status"'
      # a bridge older than the `status` line (only that refusal: any other is said)
      status_asked = false
      return
    endif
    # an accept the bridge could not give: the user's edit in it is kept (diff.Refused)
    var refused = matchlist(msg.message, '^diff_decision: \%(id \(\d\+\): \%(not accepted'
      .. '\|it came too late\)\|no pending call with id \(\d\+\)\)')
    if !empty(refused) && diff.Refused(str2nr(refused[1] .. refused[2]), msg.message)
      return
    endif
    Report('the bridge refused a line: ' .. Cut(msg.message, 300))
  endif
enddef

# Windows cannot change while the command line, the command-line window (`q:`, E11) or a prompt
# is active, and must not while the user types in Insert or Replace mode, selects (Visual and
# Select modes) or has typed an operator (`d` waiting for its motion): the keys typed next would go
# into the file the call opens. A tool call arriving then waits until Vim is back in a mode that
# allows it, unless claude withdraws it meanwhile. Claude's own terminal (Terminal-Job mode) does
# not hold it; a terminal in a popup window (fzf.vim's and floaterm's layouts) does: no window
# can be opened or left from there (E863).
const HOLDING_MODES = '^\%([cirRvVsS\x16\x13]\|no\|ni\)'

export def Holding(): bool
  return mode(1) =~# HOLDING_MODES || getcmdwintype() !=# '' || win_gettype() ==# 'popup'
enddef

# `nul`: what became of the NULs in the call's line (Decode).
def OnToolCall(msg: dict<any>, nul: string)
  if Holding()
    # A popup may be claude's own terminal (floaterm): the user is told where the call waits.
    if win_gettype() ==# 'popup'
      Info('claude''s ' .. get(msg, 'name', 'call') .. ' waits until you leave the popup window')
    endif
    deferred[string(msg.id)] = true
    timer_start(50, (_) => Deferred(msg, nul))
    return
  endif
  RunToolCall(msg, nul)
enddef

def Deferred(msg: dict<any>, nul: string)
  var key = string(msg.id)
  if !has_key(deferred, key)
    return
  endif
  if Holding()
    timer_start(50, (_) => Deferred(msg, nul))
    return
  endif
  remove(deferred, key)
  RunToolCall(msg, nul)
enddef

def RunToolCall(msg: dict<any>, nul: string)
  # An error inside a channel callback can end it without reaching the `catch` below (seen with
  # Vim 9.0.1378): a timer answers for it then, as soon as Vim runs timers again.
  var key = string(msg.id)
  unanswered[key] = msg.name
  timer_start(0, (_) => Unanswered(key))
  var args = get(msg, 'arguments', {})
  try
    if msg.name ==# 'openDiff'
      diff.Open(msg.id, args, nul)
    elseif msg.name ==# 'openFile'
      files.OpenFile(msg.id, args)
    elseif msg.name ==# 'open_files'
      files.OpenFiles(msg.id, args)
    elseif msg.name ==# 'saveDocument'
      files.Save(msg.id, args)
    else
      Respond(msg.id, {error: msg.name .. ' is not available in Vim'})
    endif
  catch
    Respond(msg.id, {error: 'Vim could not ' .. msg.name .. ': ' .. v:exception})
    Error(msg.name .. ' failed: ' .. v:exception)
  endtry
  if has_key(unanswered, key)
    remove(unanswered, key)
  endif
enddef

def Unanswered(key: string)
  if mode() =~# '^[cr]'
    # the call may still be running, held by a prompt (timers run while Vim waits for a key)
    timer_start(50, (_) => Unanswered(key))
  elseif has_key(unanswered, key)
    var name = remove(unanswered, key)
    Respond(str2nr(key), {error: 'Vim could not ' .. name .. ' (an error in the Vim plugin)'})
    Error(name .. ' failed in the plugin: please report it, with :messages and g:claude_ide_bridge_log')
  endif
enddef

# ---- :ClaudeCodeStatus ----

var status_asked = false
var status_answer: dict<any> = {}

# Asks the bridge for its view (a `status` line; Vim handles the answer while it waits, up to a
# second), then shows it, or what Vim knows when there is no answer (a bridge older than `status`).
export def Status()
  status_answer = {}
  if Running()
    status_asked = true
    Send({type: 'status'})
    var start = reltime()
    while status_asked && reltimefloat(reltime(start)) < 1.0
      sleep 10m
    endwhile
    status_asked = false
  endif
  ShowStatus(status_answer)
enddef

def ShowStatus(answer: dict<any>)
  var lines: list<string> = []
  if remote.On()
    lines += ['remote: through `' .. remote.Describe() .. '`']
  endif
  if job_status(job) !=# 'run'
    lines += ['bridge: not running (:ClaudeCodeStart or :ClaudeCode starts it)']
    if ended_why !=# ''
      lines += ['last end: ' .. ended_why]
    endif
  elseif port == 0
    lines += ['bridge: starting (pid ' .. job_info(job).process .. ')']
  else
    var lock = get(answer, 'lockFile', lock_file)
    lock = type(lock) == v:t_string ? lock : ''
    lines += ['bridge: running, pid ' .. job_info(job).process .. (remote.On() ? ' (the transport)' : '')
      .. ', port ' .. get(answer, 'port', port)
      .. (claude_host ==# '127.0.0.1' ? '' : ', host ' .. claude_host)
      .. (remote.On() ? ' on the remote side' : '')]
    lines += ['lock file: ' .. (empty(lock) ? 'none' : remote.On() ? lock .. ' (on the remote side)'
      : lock .. (filereadable(lock) ? '' : ' (MISSING: run `claude-ide-bridge doctor`)'))]
    lines += ['workspace: ' .. join(folders, ', ')]
    var conns: list<string> = []
    if has_key(answer, 'clients')
      conns = mapnew(answer.clients, (_, c) => '#' .. get(c, 'conn', '?')
        .. (index([false], get(c, 'initialized', true)) < 0 ? '' : ' (handshake)'))
    else
      conns = mapnew(items(clients), (_, kv) => '#' .. kv[0] .. (kv[1].initialized ? '' : ' (handshake)'))
    endif
    lines += ['connected clients: ' .. (empty(conns) ? 'none' : len(conns) .. ' (' .. join(conns, ', ') .. ')')]
  endif
  lines += ['claude terminal: ' .. terminal.Describe()]
  var pending = diff.Pending()
  lines += ['pending diffs: ' .. (empty(pending) ? 'none' : len(pending) .. ' (' .. join(pending, ', ') .. ')')]
  var waiting_calls = mapnew(get(answer, 'pending', []), (_, p) => get(p, 'name', '?')
    .. (type(get(p, 'filePath')) == v:t_string ? ' ' .. fnamemodify(p.filePath, ':~:.') : ''))
  if len(waiting_calls) != len(pending)
    lines += ['calls waiting for Vim: ' .. (empty(waiting_calls) ? 'none' : join(waiting_calls, ', '))]
  endif
  if !empty(stderr_tail)
    lines += ['last bridge log line: ' .. stderr_tail[-1]]
  endif
  for l in lines
    echo l
  endfor
enddef
