vim9script
# What Vim tells claude without being asked: the selection (`selection_changed`, debounced), the
# open buffers (`open_editors`), at-mentions (`at_mentioned`) and, when ALE or vim-lsp runs, their
# diagnostics (`diagnostics`).

import autoload 'claude_ide_bridge.vim' as bridge
import autoload 'claude_ide_bridge/remote.vim'
import autoload 'claude_ide_bridge/terminal.vim'

var sel_timer = 0
var editors_timer = 0
var demote_timer = 0
var pending_sel: dict<any> = {}
var last_sel = ''
var last_editors = ''
var last_diags: dict<string> = {}
# the URIs each source reported last time: one it no longer reports is withdrawn
var reported: dict<dict<bool>> = {ale: {}, lsp: {}}
var active_buf = -1

# The most bytes of a selection's text, and of tabs in an `open_editors` line, the bridge takes
# (docs/stdio.md, "Limits").
const MAX_SELECTION_TEXT = 4 * 1024 * 1024
const MAX_TABS = 1000
var said_cut = false

# ---- helpers ----

# A buffer that is a file: a normal buffer with a name (not the terminal, a diff's proposal, help),
# not a URL's (netrw's `http://...`, `scp://...`: no file of this machine), and not a folder's
# (netrw's listing of `vim .`).
export def IsFileBuf(buf: number): bool
  return buf > 0 && bufexists(buf) && getbufvar(buf, '&buftype') ==# '' && bufname(buf) !=# ''
    && bufname(buf) !~# '^\a[[:alnum:]+.-]*://' && !isdirectory(bufname(buf))
enddef

export def FullPath(buf: number): string
  return bridge.FullName(bufname(buf))
enddef

# Whether a name is valid UTF-8: a name of other bytes (`caf\xe9.txt` from a Latin-1 disk) has
# no spelling on the wire (the bridge would take it for another file, or for none).
export def Utf8Name(name: string): bool
  return list2str(str2list(name)) ==# name
enddef

# A file buffer the bridge has a name for: with a remote path map, one under its folders only
# (:help claude-ide-bridge-remote); not one whose name is not UTF-8.
def Shared(buf: number): bool
  return IsFileBuf(buf) && Utf8Name(bufname(buf)) && remote.Reaches(FullPath(buf))
enddef

# The buffer of a file, or -1. Names are compared with symbolic links resolved: the bridge names
# a file by its real path (CLAUDE.md -> AGENTS.md arrives as AGENTS.md), the buffer may have the
# link's. On Windows they are compared ignoring case, as Windows does: a path mapped back from the
# other side is spelled as the path map's folder was written, which may not be the buffer's.
export def BufOf(path: string): number
  var want = resolve(fnamemodify(path, ':p'))
  for b in getbufinfo()
    if b.name ==# ''
      continue
    endif
    var name = resolve(fnamemodify(b.name, ':p'))
    if has('win32') ? name ==? want : name ==# want
      return b.bufnr
    endif
  endfor
  return -1
enddef

def Utf8(cp: number): list<number>
  if cp < 0x80
    return [cp]
  elseif cp < 0x800
    return [0xC0 + cp / 64, 0x80 + cp % 64]
  elseif cp < 0x10000
    return [0xE0 + cp / 4096, 0x80 + cp / 64 % 64, 0x80 + cp % 64]
  endif
  return [0xF0 + cp / 262144, 0x80 + cp / 4096 % 64, 0x80 + cp / 64 % 64, 0x80 + cp % 64]
enddef

# file:// URI of an absolute path, percent-encoded byte by byte as the bridge writes it (only
# letters, digits and `-._~/` as they are), so that a file has one URI on both sides. Code point
# by code point: a composing character is one of its own, not part of the one before it. A
# Windows path as the bridge writes it too: `C:\a b\x` is `file:///c:/a%20b/x`, `\\host\share\x`
# is `file://host/share/x`.
export def Uri(path: string): string
  var out = 'file://'
  var rest = path
  if path =~# '^\a:[\\/]'
    out ..= '/' .. tolower(path[0]) .. ':'
    rest = tr(strpart(path, 2), '\', '/')
  elseif path =~# '^\\\\'
    rest = tr(strpart(path, 2), '\', '/')
  endif
  for cp in str2list(rest)
    if cp < 0x80 && nr2char(cp) =~# '^[A-Za-z0-9/._~-]$'
      out ..= nr2char(cp)
    else
      for byte in Utf8(cp)
        out ..= printf('%%%02X', byte)
      endfor
    endif
  endfor
  return out
enddef

const LANGUAGES = {sh: 'shellscript', bash: 'shellscript', zsh: 'shellscript', cs: 'csharp',
  text: 'plaintext', '': 'plaintext', javascriptreact: 'javascriptreact', typescriptreact: 'typescriptreact',
  dockerfile: 'dockerfile', make: 'makefile', tex: 'latex', objc: 'objective-c', objcpp: 'objective-cpp'}

export def LanguageId(buf: number): string
  var ft = getbufvar(buf, '&filetype')
  return get(LANGUAGES, ft, ft)
enddef

# The `character` of a position on the wire: UTF-16 code units before it, as VS Code and LSP count
# them (docs/protocol.md, "Roles and terms"). A character beyond U+FFFF is two; a composing character is
# one of its own.
def Utf16Len(s: string): number
  # ASCII when every byte is a character. (Not a regex for non-ASCII: Vim's regex takes a
  # composing character as part of the one before it, so "cafe" + U+0301 looked ASCII.)
  var chars = strchars(s)
  if chars == strlen(s)
    return chars
  endif
  return chars + len(filter(str2list(s), (_, c) => c > 0xFFFF))
enddef

# The `character` of byte column `col` (1-based) in `line`: what comes before it, in UTF-16 units.
def CharIndex(line: string, col: number): number
  return col <= 1 ? 0 : Utf16Len(strpart(line, 0, col - 1))
enddef

# The byte column (1-based) just after the character at byte column `col` of `line` (a column past
# the end stays past it): Vim's inclusive ends, made exclusive.
def AfterChar(line: string, col: number): number
  # The character with its composing ones (skipcc): an accent written as e + U+0301 is one.
  return col > strlen(line) ? col : col + strlen(strcharpart(strpart(line, col - 1), 0, 1, 1))
enddef

# ---- selection ----

def Snapshot(): dict<any>
  var buf = bufnr()
  if !Shared(buf)
    return {}
  endif
  var m = mode()
  if m =~# "^[vV\<C-v>]"
    var a = getpos('v')
    var b = getpos('.')
    if a[1] > b[1] || (a[1] == b[1] && a[2] > b[2])
      [a, b] = [b, a]
    endif
    # 'selection' exclusive: the character at the end is not selected (unless the selection is
    # that one character)
    var excl = &selection ==# 'exclusive' && a[1 : 2] != b[1 : 2]
    if m[0] ==# "\<C-v>"
      var c1 = min([a[2], b[2]])
      var c2 = max([a[2], b[2]])
      return {buf: buf, kind: 'block', l1: a[1], c1: c1, l2: b[1], c2: c2, excl: excl,
        cols: BlockCols(a, b)}
    endif
    return {buf: buf, kind: m[0], l1: a[1], c1: a[2], l2: b[1], c2: b[2], excl: excl}
  endif
  return {buf: buf, kind: 'cursor', l1: line('.'), c1: col('.'), l2: line('.'), c2: col('.')}
enddef

# The byte where the character holding byte `b` (1-based) of `line` starts.
def CharStart(line: string, b: number): number
  return b <= 1 ? 1 : byteidx(line, charidx(line, b - 1)) + 1
enddef

# A block selection as Vim shows it, in the current window: the screen columns between the
# corners, so that each line gives the characters under them whatever bytes come before (tabs,
# multibyte text); `$` takes every line to its end. Per line, [first byte, byte after the last]
# (1-based; empty past the line's end). Empty where this Vim cannot tell screen columns, or for a
# block too tall to walk on each move: the corners' byte columns are taken then.
def BlockCols(a: list<number>, b: list<number>): list<list<number>>
  if abs(b[1] - a[1]) > 1000 || !exists('*virtcol2col')
    return []
  endif
  var cols: list<list<number>> = []
  try
    var va = virtcol([a[1], a[2]], 1)
    var vb = virtcol([b[1], b[2]], 1)
    var left = min([va[0], vb[0]])
    var to_end = getcurpos()[4] == v:maxcol
    var right = max([va[1], vb[1]])
    # 'selection' exclusive: the right column is not selected when it is the later corner's, as
    # Vim does it (the earlier corner's stays selected)
    if &selection ==# 'exclusive' && vb[1] > va[1] && vb[0] - 1 >= va[1]
      right = vb[0] - 1
    endif
    var win = win_getid()
    for lnum in range(min([a[1], b[1]]), max([a[1], b[1]]))
      var line = getline(lnum)
      var past = strlen(line) + 1
      if virtcol([lnum, '$']) - 1 < left
        cols->add([past, past])
        continue
      endif
      var first = CharStart(line, virtcol2col(win, lnum, left))
      var stop = to_end || virtcol([lnum, '$']) - 1 <= right ? past
        : AfterChar(line, CharStart(line, virtcol2col(win, lnum, right)))
      cols->add([first, stop])
    endfor
  catch
    return []
  endtry
  return cols
enddef

def Pos(line: number, character: number): dict<number>
  return {line: line, character: character}
enddef

def SelectionMsg(s: dict<any>): dict<any>
  if !bufexists(s.buf) || !bufloaded(s.buf)
    return {}
  endif
  var lines = getbufline(s.buf, s.l1, s.l2)
  if empty(lines)
    return {}
  endif
  var start: dict<number>
  var end: dict<number>
  var text = ''
  if s.kind ==# 'cursor'
    start = Pos(s.l1 - 1, CharIndex(lines[0], s.c1))
    end = start
  elseif s.kind ==# 'V'
    start = Pos(s.l1 - 1, 0)
    end = Pos(s.l2 - 1, Utf16Len(lines[-1]))
    text = join(lines, "\n")
  elseif s.kind ==# 'v'
    # the end column is inclusive in Vim: include its whole (possibly multibyte) character
    # (but with 'selection' exclusive)
    var last = lines[-1]
    var stop = min([get(s, 'excl', false) ? s.c2 : AfterChar(last, s.c2), strlen(last) + 1]) - 1
    start = Pos(s.l1 - 1, CharIndex(lines[0], s.c1))
    end = Pos(s.l2 - 1, CharIndex(last, stop + 1))
    if len(lines) == 1
      text = strpart(lines[0], s.c1 - 1, stop - s.c1 + 1)
    else
      text = join([strpart(lines[0], s.c1 - 1)] + lines[1 : -2] + [strpart(last, 0, stop)], "\n")
    endif
  elseif len(get(s, 'cols', [])) == len(lines)
    # a block, by the screen columns Vim shows it in
    var cols: list<list<number>> = s.cols
    start = Pos(s.l1 - 1, CharIndex(lines[0], cols[0][0]))
    end = Pos(s.l2 - 1, CharIndex(lines[-1], cols[-1][1]))
    text = join(mapnew(lines, (i, l) => strpart(l, cols[i][0] - 1, cols[i][1] - cols[i][0])), "\n")
  else
    var after = get(s, 'excl', false) ? s.c2 : s.c2 + 1
    start = Pos(s.l1 - 1, CharIndex(lines[0], s.c1))
    end = Pos(s.l2 - 1, CharIndex(lines[-1], after))
    text = join(mapnew(lines, (_, l) => strpart(l, s.c1 - 1, after - s.c1)), "\n")
  endif
  if strlen(text) > MAX_SELECTION_TEXT
    # The bridge refuses a larger one (and keeps the last): the text's start, on a character's
    # boundary, with the whole range; said once.
    text = strpart(text, 0, byteidx(text, charidx(text, MAX_SELECTION_TEXT)))
    if !said_cut
      said_cut = true
      bridge.Info('a selection of more than 4 MiB reaches claude cut to its first 4 MiB')
    endif
  endif
  return {type: 'selection_changed', filePath: FullPath(s.buf), text: text,
    selection: {start: start, end: end}}
enddef

def SendSelection(force: bool = false)
  sel_timer = 0
  if empty(pending_sel)
    return
  endif
  var msg = SelectionMsg(pending_sel)
  if empty(msg)
    return
  endif
  var enc = json_encode(msg)
  if enc ==# last_sel && !force
    return
  endif
  last_sel = enc
  bridge.Send(msg)
enddef

# Called on cursor moves: remembers where the selection is now, sends it after the debounce.
def Track()
  var buf = bufnr()
  if IsFileBuf(buf) && buf != active_buf
    active_buf = buf
    ScheduleEditors()
  endif
  if !bridge.Option('track_selection', true)
    return
  endif
  var snap = Snapshot()
  if empty(snap)
    return
  endif
  pending_sel = snap
  if sel_timer != 0
    timer_stop(sel_timer)
  endif
  sel_timer = timer_start(bridge.Option('selection_debounce_ms', 100), (_) => SendSelection())
enddef

# Leaving visual mode: keep the visual selection for a moment (so that going to the claude terminal
# keeps it as context); then, unless Vim is in the terminal now, report the cursor again.
def LeftVisual()
  if demote_timer != 0
    timer_stop(demote_timer)
  endif
  demote_timer = timer_start(bridge.Option('visual_demotion_delay_ms', 50), (_) => Demote())
enddef

def Demote()
  demote_timer = 0
  if !IsFileBuf(bufnr()) || mode() =~# "^[vV\<C-v>]"
    return
  endif
  Track()
enddef

def OnModeChanged()
  var old = v:event.old_mode
  var new = v:event.new_mode
  if old =~# "^[vV\<C-v>]" && new !~# "^[vV\<C-v>]" && new !~# '^c'
    LeftVisual()
  elseif new =~# "^[vV\<C-v>]" && new !=# old
    # A selection made without moving (`V` on a line, `v` switched to `V`): no CursorMoved follows.
    Track()
  endif
enddef

# Sends the current selection again (a client that just connected may have missed it).
export def Resend()
  timer_start(500, (_) => {
    if empty(pending_sel)
      Track()
    else
      SendSelection(true)
    endif
    SendEditors(true)
  })
enddef

# ---- at_mentioned ----

export def Mention(path: string, line_start: number = -1, line_end: number = -1)
  if !Utf8Name(path)
    bridge.Error(fnamemodify(path, ':~:.') .. ': the name is not UTF-8, claude has no name for it')
    return
  endif
  if !remote.Reaches(path)
    bridge.Error(fnamemodify(path, ':~:.') .. ' is outside the folders of'
      .. ' g:claude_ide_bridge_remote.path_map: claude, over there, has no name for it')
    return
  endif
  var msg: dict<any> = {type: 'at_mentioned', filePath: path}
  if line_start >= 0
    msg.lineStart = line_start
    msg.lineEnd = line_end >= 0 ? line_end : line_start
  endif
  bridge.Start(() => {
    bridge.Send(msg)
    # (The bridge keeps it for a claude that connects within MENTION_KEPT minutes.) Said once
    # a bridge: a claude just started takes a few seconds to connect.
    if !bridge.Connected() && !told_unconnected
      told_unconnected = true
      bridge.Info('no claude is connected yet: it gets ' .. fnamemodify(path, ':t') .. ' once one'
        .. ' connects (within ' .. MENTION_KEPT .. ' minutes)')
    endif
  })
enddef
const MENTION_KEPT = 5
var told_unconnected = false

# :[range]ClaudeCodeSend
export def SendRange(line1: number, line2: number)
  var buf = bufnr()
  if !IsFileBuf(buf)
    bridge.Error(':ClaudeCodeSend works in a buffer of a file')
    return
  endif
  Mention(FullPath(buf), line1 - 1, line2 - 1)
  if bridge.Option('focus_after_send', false)
    terminal.Show(true)
  endif
enddef

# :ClaudeCodeAdd {path} [start] [end]
export def Add(args: list<string>)
  if empty(args) || len(args) > 3
    bridge.Error('usage: :ClaudeCodeAdd {path} [start-line] [end-line]')
    return
  endif
  var path = ''
  try
    path = fnamemodify(AddedName(args[0]), ':p')
  catch
    bridge.Error(substitute(v:exception, '^Vim\%((\a\+)\)\=:', '', ''))
    return
  endtry
  if !filereadable(path) && !isdirectory(path)
    bridge.Error('no such file or directory: ' .. args[0])
    return
  endif
  if isdirectory(path)
    Mention(substitute(path, '/$', '', ''))
    return
  endif
  if len(args) == 1
    Mention(path)
    return
  endif
  if args[1] !~# '^\d\+$' || (len(args) == 3 && args[2] !~# '^\d\+$')
    bridge.Error('line numbers must be positive numbers: ' .. join(args[1 :]))
    return
  endif
  var first = str2nr(args[1])
  var last = len(args) == 3 ? str2nr(args[2]) : first
  if first < 1 || last < first
    bridge.Error('the line range must start at 1 or more and not end before it starts')
    return
  endif
  Mention(path, first - 1, last - 1)
enddef

# The file :ClaudeCodeAdd names: `%`, `#`, `#n`, `##` or `<cfile>` and the like (with modifiers
# such as `:h`, and a path below) as on Vim's command line, a leading `~` or `$VAR`; the rest of
# the name as it is (expand() would read `[...]`, `{a,b}` or `*` as patterns, and `#` inside a name
# as the alternate file).
def AddedName(arg: string): string
  var special = matchstr(arg, '^\%(%\|##\|#\d*\|<\a\+>\)\%(:[phtreS~.]\)*\ze\%(/\|$\)')
  if special !=# ''
    var name = expand(special)
    if name ==# ''
      throw 'no file name for ' .. special
    endif
    return name .. strpart(arg, strlen(special))
  endif
  var head = matchstr(arg, '^\%(\~[^/$*?[{]*\|\$\h\w*\|\${\h\w*}\)\ze\%(/\|$\)')
  var var_name = substitute(head, '[{}]', '', 'g')
  if head =~# '^\~' || (head !=# '' && exists(var_name))
    return expand(var_name) .. strpart(arg, strlen(head))
  endif
  return arg
enddef

# ---- open editors ----

export def ScheduleEditors()
  if editors_timer != 0
    timer_stop(editors_timer)
  endif
  editors_timer = timer_start(50, (_) => SendEditors())
enddef

export def EditorsMsg(): dict<any>
  var cur = bufnr()
  var active = IsFileBuf(cur) ? cur : active_buf
  var tabs: list<dict<any>> = []
  for b in getbufinfo({buflisted: 1})
    if !Shared(b.bufnr)
      continue
    endif
    var path = fnamemodify(b.name, ':p')
    add(tabs, {uri: Uri(path), label: fnamemodify(path, ':t'), fileName: path,
      isDirty: b.changed ? true : false, isActive: b.bufnr == active, isUntitled: false,
      languageId: LanguageId(b.bufnr), lineCount: get(b, 'linecount', 0)})
  endfor
  if len(tabs) > MAX_TABS
    # (`vim $(git ls-files)` in a large repository) the active one and the first others
    var first = filter(copy(tabs), (_, t) => t.isActive)
    tabs = first + filter(tabs, (_, t) => !t.isActive)[: MAX_TABS - len(first) - 1]
  endif
  return {type: 'open_editors', tabs: tabs}
enddef

# Sends the open buffers when they changed since the last time (or always with `force`).
export def SendEditors(force: bool = false)
  editors_timer = 0
  if !bridge.Running()
    return
  endif
  var msg = EditorsMsg()
  var enc = json_encode(msg)
  if enc ==# last_editors && !force
    return
  endif
  last_editors = enc
  bridge.Send(msg)
enddef

# ---- diagnostics from ALE and vim-lsp (only when they run: else the bridge's own sources answer) ----

const SEVERITY = {E: 'Error', W: 'Warning', I: 'Information', H: 'Hint'}
const LSP_SEVERITY = {1: 'Error', 2: 'Warning', 3: 'Information', 4: 'Hint'}

def SendDiagnostics(uri: string, list: list<dict<any>>)
  var msg = {type: 'diagnostics', uri: uri, diagnostics: list}
  var enc = json_encode(msg)
  if get(last_diags, uri, '') ==# enc
    return
  endif
  last_diags[uri] = enc
  bridge.Send(msg)
enddef

# The files `source` reports now; the ones it reported before and no longer does (a buffer
# wiped, a server stopped) are withdrawn with `null`: the editor's last word would otherwise
# stand for them for good, and the bridge's language servers answer for them again.
def Reported(source: string, uris: dict<bool>)
  for uri in keys(reported[source])
    if !has_key(uris, uri)
      if has_key(last_diags, uri)
        remove(last_diags, uri)
      endif
      bridge.Send({type: 'diagnostics', uri: uri, diagnostics: v:null})
    endif
  endfor
  reported[source] = uris
enddef

def FromAle()
  if !exists('g:loaded_ale') || !bridge.Running()
    return
  endif
  var uris: dict<bool> = {}
  for b in getbufinfo({buflisted: 1})
    if !Shared(b.bufnr) || getbufvar(b.bufnr, 'ale_linted', 0) == 0
      continue
    endif
    var out: list<dict<any>> = []
    var here = fnamemodify(b.name, ':p')
    for it in call('ale#engine#GetLoclist', [b.bufnr])
      # ALE keeps a linter's items for other files (a header's errors, an imported module's)
      # in the buffer's list: they are not this file's.
      if get(it, 'bufnr', b.bufnr) != b.bufnr
          || (has_key(it, 'filename') && bridge.FullName(it.filename) !=# here)
        continue
      endif
      # ALE's columns are Vim's: 1-based bytes, the end inclusive.
      var l = max([get(it, 'lnum', 1), 1])
      var c = max([get(it, 'col', 1), 1])
      var el = max([get(it, 'end_lnum', l), 1])
      var ec = max([get(it, 'end_col', c), 1])
      var line = get(getbufline(b.bufnr, l), 0, '')
      var end_line = el == l ? line : get(getbufline(b.bufnr, el), 0, '')
      var d: dict<any> = {message: get(it, 'text', ''), severity: get(SEVERITY, get(it, 'type', 'E'), 'Error'),
        range: {start: Pos(l - 1, CharIndex(line, c)), end: Pos(el - 1, CharIndex(end_line, AfterChar(end_line, ec)))},
        source: get(it, 'linter_name', 'ale')}
      if has_key(it, 'code')
        d.code = type(it.code) == v:t_string ? it.code : string(it.code)
      endif
      add(out, d)
    endfor
    SendDiagnostics(Uri(here), out)
    uris[Uri(here)] = true
  endfor
  Reported('ale', uris)
enddef

def FromVimLsp()
  if !exists('g:lsp_loaded') || !bridge.Running()
    return
  endif
  var all: dict<any>
  try
    all = call('lsp#internal#diagnostics#state#_get_all_diagnostics_grouped_by_uri_and_server', [])
  catch
    return  # g:lsp_loaded set by hand to keep vim-lsp off, or a vim-lsp without this function
  endtry
  var uris: dict<bool> = {}
  for [uri, servers] in items(all)
    # A server gone (vim-lsp keeps its files with no server): withdrawn, not reported clean.
    if empty(servers) || !remote.ReachesUri(uri, Uri)
      continue
    endif
    uris[uri] = true
    var out: list<dict<any>> = []
    for [server, response] in items(servers)
      for d in get(get(response, 'params', {}), 'diagnostics', [])
        var item: dict<any> = {message: get(d, 'message', ''), range: d.range,
          severity: get(LSP_SEVERITY, get(d, 'severity', 1), 'Error'), source: get(d, 'source', server)}
        if has_key(d, 'code')
          item.code = type(d.code) == v:t_string ? d.code : string(d.code)
        endif
        add(out, item)
      endfor
    endfor
    SendDiagnostics(uri, out)
  endfor
  Reported('lsp', uris)
enddef

# ---- autocommands, while the bridge runs ----

export def Attach()
  told_unconnected = false
  last_sel = ''
  last_editors = ''
  last_diags = {}
  reported = {ale: {}, lsp: {}}
  augroup claude_ide_bridge_context
    autocmd!
    autocmd CursorMoved,CursorMovedI,BufEnter,WinEnter * Track()
    autocmd ModeChanged *:* OnModeChanged()
    autocmd BufAdd,BufDelete,BufWipeout,BufFilePost,BufWritePost,FileType * ScheduleEditors()
    if exists('##BufModifiedSet')
      autocmd BufModifiedSet * ScheduleEditors()
    else
      autocmd TextChanged,TextChangedI,InsertLeave * ScheduleEditors()
    endif
    autocmd User ALELintPost FromAle()
    # a buffer ALE linted goes away: its diagnostics are withdrawn (once it is gone)
    autocmd BufDelete,BufWipeout * timer_start(0, (_) => FromAle())
    autocmd User lsp_diagnostics_updated FromVimLsp()
  augroup END
  Track()
  SendEditors(true)
  FromAle()
  FromVimLsp()
enddef

export def Detach()
  silent! autocmd! claude_ide_bridge_context
  for t in [sel_timer, editors_timer, demote_timer]
    if t != 0
      timer_stop(t)
    endif
  endfor
  [sel_timer, editors_timer, demote_timer] = [0, 0, 0]
enddef
