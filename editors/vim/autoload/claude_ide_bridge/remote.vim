vim9script
# Remote use (:help claude-ide-bridge-remote): the bridge runs where the code is (an SSH host, a
# container, WSL), reached through a transport the user already trusts (`ssh HOST`, `docker exec
# -i NAME`, ...). Only the bridge's JSON lines cross it; claude runs there too, in the terminal.
# This file turns g:claude_ide_bridge_remote into the commands Vim runs, and a remote bridge's end
# into what the user is told.

import autoload 'claude_ide_bridge.vim' as bridge

# What the wrapper prints when the program is not on the remote PATH (found in the bridge's stderr).
const NOT_FOUND = 'claude-ide-bridge-remote: not found: '

# Runs "$1" with the other arguments, once `command -v` found it; else says so and exits 127.
# A leading `~/` of the program (the words are quoted, so no shell over there expands it) is
# the home folder there, when there is one (`$HOME` set and not empty; a variable of its own,
# unset after, so that nothing the user exported changes).
const FIND = 'case "$1" in "~/"*) if [ -n "${HOME-}" ]; then claude_ide_bridge_program=${HOME%/}/${1#"~/"}; '
  .. 'shift; set -- "$claude_ide_bridge_program" "$@"; unset claude_ide_bridge_program; fi;; esac; '
  .. 'command -v "$1" >/dev/null 2>&1 || { printf "' .. NOT_FOUND
  .. '%s\n" "$1" >&2; exit 127; }; exec "$@"'

# In folder "$1", with CLAUDE_CODE_SSE_PORT="$2" and claude told to connect to host "$3" (its own
# 127.0.0.1: no override, not even one of the login shell's): runs "$4" with the arguments after it.
const IN_WORKSPACE = 'cd -- "$1" || exit 1; CLAUDE_CODE_SSE_PORT=$2; ENABLE_IDE_INTEGRATION=true;'
  .. ' CLAUDE_CODE_AUTO_CONNECT_IDE=true;'
  .. ' export CLAUDE_CODE_SSE_PORT ENABLE_IDE_INTEGRATION CLAUDE_CODE_AUTO_CONNECT_IDE;'
  .. ' if [ "$3" = 127.0.0.1 ]; then unset CLAUDE_CODE_IDE_HOST_OVERRIDE;'
  .. ' else CLAUDE_CODE_IDE_HOST_OVERRIDE=$3; export CLAUDE_CODE_IDE_HOST_OVERRIDE; fi; shift 3; ' .. FIND

const INSTALL = 'install claude-ide-bridge there (in a clone of its repository on that machine:'
  .. ' cargo install --locked --path program/cli), or give its full path as'
  .. ' g:claude_ide_bridge_remote.bridge (:help claude-ide-bridge-remote)'

# The setting when remote use is on, else {}.
export def Settings(): dict<any>
  var r = bridge.Option('remote', {})
  return type(r) == v:t_dict && !empty(r) ? r : {}
enddef

export def On(): bool
  return !empty(Settings())
enddef

# What is wrong with the setting, or ''.
export def Problem(): string
  var r = Settings()
  var t = get(r, 'transport', [])
  if type(t) != v:t_list || empty(t) || !empty(filter(copy(t), (_, w) => type(w) != v:t_string))
    return "g:claude_ide_bridge_remote.transport must be a command as a list of words, e.g. ['ssh', 'devbox']"
  endif
  var m = get(r, 'path_map', {})
  if type(m) != v:t_dict && !(type(m) == v:t_string && m ==# 'wsl')
    return "g:claude_ide_bridge_remote.path_map must be a dictionary {editor folder: remote folder} or 'wsl'"
  endif
  var k = get(r, 'keepalive', KEEPALIVE)
  if (type(k) != v:t_number && type(k) != v:t_float) || k < 0
    return 'g:claude_ide_bridge_remote.keepalive must be a number of seconds (0: off)'
  endif
  if !executable(t[0])
    return t[0] .. ' (the transport of g:claude_ide_bridge_remote) was not found'
  endif
  return ''
enddef

# How often (seconds) Vim asks the bridge over there whether it is there, when the setting says
# nothing.
const KEEPALIVE = 15

# Seconds between two keepalive lines (a `status` line), 0 for none: a link gone silent (a laptop
# asleep, a network gone) ends no pipe until the transport gives up, which ssh may take hours to.
export def Keepalive(): float
  return 1.0 * get(Settings(), 'keepalive', KEEPALIVE)
enddef

# The bridge's arguments for the keepalive: it stops once nothing came from Vim for 20 keepalives
# (5 minutes by default: a Vim suspended with Ctrl-Z, or a laptop asleep, for less keeps it).
export def KeepaliveArgs(): list<string>
  var every = Keepalive()
  # (At most a day, the bridge's bound.)
  return every > 0
    ? ['--editor-timeout', string(min([86400, max([1, float2nr(ceil(20 * every))])]))] : []
enddef

# The transport as the user reads it: `ssh devbox`.
export def Describe(): string
  return join(get(Settings(), 'transport', []))
enddef

# A word for the login shell over there, whatever it holds (spaces, quotes, `$`, `\`, line
# breaks, non-ASCII names), read as that one word by a POSIX shell (sh, dash, bash, zsh) and by
# fish, the shells ssh and wsl.exe hand the line to: its text in single quotes, each `'` and `\`
# in double quotes between them. (fish reads `\'` and `\\` inside single quotes as escapes: a
# word ending in `\` closed its quote late there, and the next word's text ran as commands.)
export def ShellWord(s: string): string
  return "'" .. substitute(s, '[''\\]', (m) => "'\"" .. (m[0] ==# '\' ? '\\' : "'") .. "\"'", 'g') .. "'"
enddef

# Whether the transport hands the command to a shell on the other side as one line (ssh, and
# wsl.exe without --exec), so that each word must be quoted; docker, podman and kubectl exec pass
# the words as they are. The setting's `quote` decides when given.
def Quoted(transport: list<string>): bool
  var r = Settings()
  if has_key(r, 'quote')
    return !!r.quote
  endif
  var prog = fnamemodify(transport[0], ':t')
  if prog =~? '^ssh\(\.exe\)\=$'
    return true
  endif
  return prog =~? '^wsl\(\.exe\)\=$' && index(transport, '-e') < 0 && index(transport, '--exec') < 0
enddef

def Through(transport: list<string>, words: list<string>): list<string>
  return transport + (Quoted(transport) ? mapnew(words, (_, w) => ShellWord(w)) : words)
enddef

def Words(v: any): list<string>
  return type(v) == v:t_list ? copy(v) : split(v)
enddef

# The editor's folder (a full path without its last separator) for a folder the user wrote.
def EditorFolder(d: string): string
  return bridge.FullFolder(d)
enddef

# The remote side of an editor path, through the path map (the longest prefix), or ''.
def ToRemote(path: string, map: dict<any>): string
  var best = ''
  for ed in keys(map)
    var e = EditorFolder(ed)
    if bridge.Below(path, e) && strlen(e) > strlen(best)
      best = e
    endif
  endfor
  if best ==# ''
    return ''
  endif
  for [ed, here] in items(map)
    if EditorFolder(ed) ==# best
      # the rest of a Windows path, with the remote side's separator; after a root (`/`, `C:\`)
      # the rest starts without one
      var rest = strpart(path, strlen(best))
      rest = has('win32') ? tr(rest, '\', '/') : rest
      if rest !=# '' && rest[0] !=# '/'
        rest = '/' .. rest
      endif
      var joined = RemoteFolder(here) .. rest
      return joined =~# '^//' ? joined[1 :] : joined
    endif
  endfor
  return ''
enddef

# Whether `path` is a Windows drive's (`C:\...`, `C:/...`): what `path_map: 'wsl'` maps.
def OnADrive(path: string): bool
  return path =~# '^\a:[\\/]'
enddef

# A remote folder the user wrote, without its last `/` but for the root `/`.
def RemoteFolder(here: string): string
  var cut = substitute(here, '/\+$', '', '')
  return cut ==# '' ? '/' : cut
enddef

# Whether the bridge has a name for the editor's file `path`: always, unless a path map (a
# dictionary) is given and `path` is under none of its folders. The bridge refuses such a path
# with an error line; Vim does not send it (a cursor moving in such a file would be refused at
# every move).
export def Reaches(path: string): bool
  var m = get(Settings(), 'path_map', {})
  if type(m) == v:t_string && m ==# 'wsl'
    # every drive, and nothing else (a UNC path such as \\wsl.localhost\... is refused)
    return OnADrive(path)
  endif
  if type(m) != v:t_dict || empty(m)
    return true
  endif
  return !empty(filter(keys(m), (_, ed) => bridge.Below(path, EditorFolder(ed))))
enddef

# The same for a file:// URI as Vim spells it (`uri_of` turns a folder into one).
export def ReachesUri(uri: string, Uri_of: func(string): string): bool
  var m = get(Settings(), 'path_map', {})
  if type(m) != v:t_dict || empty(m)
    return true
  endif
  return !empty(filter(keys(m), (_, ed) => uri ==# Uri_of(EditorFolder(ed))
    || stridx(uri, Uri_of(EditorFolder(ed)) .. '/') == 0))
enddef

# The workspace folders on the remote side: the setting's `workspace`, else the editor's folders
# (`local`) through the path map, else as they are (the same path on both sides).
export def Workspace(local: list<string>): list<string>
  var r = Settings()
  var w = get(r, 'workspace', [])
  var list = type(w) == v:t_list ? copy(w) : [w]
  if !empty(list)
    return list
  endif
  return mapnew(local, (_, d) => ForClaude(d))
enddef

# Why the editor's folders `local` cannot be the workspace over there ('' when they can): one
# under no folder of the path map (Vim started above or beside the mapped folder) would be
# given to the bridge as it is, a path of this machine.
export def WorkspaceProblem(local: list<string>): string
  var w = get(Settings(), 'workspace', [])
  if !empty(type(w) == v:t_list ? w : [w])
    return ''
  endif
  var outside = filter(copy(local), (_, d) => !Reaches(d))
  return empty(outside) ? '' : "Vim's workspace " .. fnamemodify(outside[0], ':~')
    .. ' is under no folder of g:claude_ide_bridge_remote.path_map: :cd into one, or set'
    .. ' g:claude_ide_bridge_remote.workspace'
enddef

# The name claude (on the other side) has for the editor's path `path`: through the path map, or
# `path` when no map names it (or there is no map). Vim's answers to claude's calls name files so.
export def ForClaude(path: string): string
  var m = get(Settings(), 'path_map', {})
  if type(m) == v:t_string && m ==# 'wsl'
    # a Windows drive's path as WSL mounts it: C:\Users\me -> /mnt/c/Users/me
    return OnADrive(path) ? '/mnt/' .. tolower(path[0]) .. tr(strpart(path, 2), '\', '/') : path
  endif
  if type(m) != v:t_dict || empty(m)
    return path
  endif
  var there = ToRemote(path, m)
  return there ==# '' ? path : there
enddef

# The command that runs the bridge on the other side: `TRANSPORT sh -c FIND sh claude-ide-bridge
# serve --stdio ...`. `args` are serve's arguments without the path map.
export def BridgeCommand(args: list<string>): list<string>
  var r = Settings()
  var words = ['sh', '-c', FIND, 'sh'] + Words(get(r, 'bridge', 'claude-ide-bridge')) + args
  var m = get(r, 'path_map', {})
  if type(m) == v:t_string
    words += ['--path-map', m]
  else
    # (In the order of the names: a Vim dictionary's own has none, and of two names for one
    # folder there, the bridge names files by the last.)
    for ed in sort(keys(m))
      words += ['--path-map', EditorFolder(ed) .. '=' .. RemoteFolder(m[ed])]
    endfor
  endif
  return Through(r.transport, words)
enddef

# The transport for the claude terminal: the setting's `terminal`, else the transport with a
# terminal asked for (`ssh -t`, `docker exec -it`; wsl.exe runs in Vim's terminal as it is).
def TerminalTransport(): list<string>
  var r = Settings()
  if has_key(r, 'terminal')
    return Words(r.terminal)
  endif
  var t: list<string> = copy(r.transport)
  var prog = fnamemodify(t[0], ':t')
  if prog =~? '^ssh\(\.exe\)\=$'
    return [t[0], '-t'] + t[1 :]
  endif
  if prog =~? '^\(docker\|podman\|kubectl\|nerdctl\)\(\.exe\)\=$'
    var i = index(t, '-i')
    if i >= 0
      return t[: i] + ['-t'] + t[i + 1 :]
    endif
  endif
  return t
enddef

# The command of :ClaudeCode on the other side: claude (the setting's `claude`, else `claude`)
# with `args`, in the first remote workspace folder, told the remote bridge's port.
export def TerminalCommand(args: list<string>, port: number, host: string): list<string>
  var r = Settings()
  var folder = get(bridge.Folders(), 0, '.')
  var words = ['sh', '-c', IN_WORKSPACE, 'sh', folder, string(port), host]
    + Words(get(r, 'claude', 'claude')) + args
  return Through(TerminalTransport(), words)
enddef

# Why the remote bridge ended, for the user; '' when nothing specific is known.
export def Why(status: number, stderr: list<string>, was_ready: bool, closed_diffs: number,
    last_is_recent: bool): string
  var where = Describe()
  for l in stderr
    var at = stridx(l, NOT_FOUND)
    if at >= 0
      return strpart(l, at + strlen(NOT_FOUND)) .. ' was not found through `' .. where .. '`: ' .. INSTALL
    endif
  endfor
  if !was_ready
    for l in stderr
      var flag = matchstr(l, "unexpected argument '\\zs--[a-z-]\\+\\ze'")
      if flag =~# '^--\(stdio\|path-map\|ide-name\|workspace\|editor-timeout\)$'
          || l =~# "unrecognized subcommand 'serve'"
        return 'the claude-ide-bridge reached through `' .. where .. '` is too old: it does not know '
          .. (flag ==# '' ? 'serve' : flag) .. '. Update it there (in a clone of its repository on that'
          .. ' machine: git pull, then cargo install --locked --path program/cli)'
      endif
    endfor
    return ''
  endif
  # (Not the bridge's own "client connected" lines, which come back through the transport too.)
  var errors = filter(copy(stderr), (_, l) =>
    l =~? '^\s*error\|ssh:\|connection \(closed\|reset\|refused\|timed out\|lost\)\|broken pipe')
  # Killed (Vim's -1: a signal, OOM, a user's kill), the last line is the bridge's last word
  # before it, which says nothing of the end; so is a line that came well before the end (a
  # client connected), when the transport itself ended without a word (ssh killed).
  var tail = !empty(errors) ? ': ' .. errors[-1]
    : empty(stderr) || status == -1 || !last_is_recent ? '' : ': ' .. stderr[-1]
  var how = status == -1 ? 'its transport was killed by a signal' : 'status ' .. status
  return 'the link to the remote bridge (`' .. where .. '`) dropped (' .. how .. tail .. ').'
    .. AfterTheDrop(closed_diffs)
enddef

# Why the link was dropped by Vim: the bridge over there did not answer a keepalive for `waited`
# seconds.
export def Silent(waited: float, closed_diffs: number): string
  return 'the link to the remote bridge (`' .. Describe() .. '`) went silent: no answer for '
    .. (waited == round(waited) ? string(float2nr(waited)) : printf('%.1f', waited))
    .. ' s, so Vim dropped it.' .. AfterTheDrop(closed_diffs)
enddef

# What became of the pending diffs when the link dropped, and what to do.
def AfterTheDrop(closed_diffs: number): string
  return (closed_diffs == 0 ? '' : ' ' .. closed_diffs .. ' pending diff(s) closed unanswered by Vim:'
      .. ' the remote bridge answers claude for them as it stops (had it been killed, claude asks'
      .. ' in its own terminal).')
    .. ' :ClaudeCodeStart connects again; then, in claude, /ide and Vim (it reconnects by itself'
    .. ' only within about 17 s of the drop)'
enddef
