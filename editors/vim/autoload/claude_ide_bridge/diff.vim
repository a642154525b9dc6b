vim9script
# claude's proposed changes (`openDiff`): the file and the proposal side by side. `:w` in the
# proposal accepts what it holds then (the user's edits included; ZZ and :x too), closing it
# rejects; `:xa` (`:wqa`) accepts every pending one.

import autoload 'claude_ide_bridge.vim' as bridge
import autoload 'claude_ide_bridge/context.vim'
import autoload 'claude_ide_bridge/files.vim'
import autoload 'claude_ide_bridge/terminal.vim'

# id (as a string) -> the diff's state
var diffs: dict<dict<any>> = {}

export def Pending(): list<string>
  return mapnew(values(diffs), (_, d) => fnamemodify(d.path, ':~:.'))
enddef

# Whether every line break of `text` is CRLF (there is at least one).
def Crlf(text: string): bool
  return text =~# "\r\n" && stridx(substitute(text, "\r\n", '', 'g'), "\n") < 0
enddef

# The lines of `text`, split at CRLF (`crlf`) or at LF (each CR then kept in its line).
def Lines(text: string, crlf: bool): list<string>
  var lines = split(text, crlf ? "\r\n" : "\n", true)
  if len(lines) > 1 && lines[-1] ==# ''
    remove(lines, -1)
  endif
  return lines
enddef

# What a NUL of claude's text was read as (claude_ide_bridge.vim, Decode).
const NUL_STANDIN = "\ufdd0"

# The lines of the proposal of diff `d` as the buffer holds them (split as `d.crlf` says): a NUL
# as a NL (in Vim, a NUL in a line's text is a NL).
def ProposalLines(d: dict<any>): list<string>
  var lines = Lines(d.contents, d.crlf)
  return d.nul ? map(lines, (_, l) => tr(l, NUL_STANDIN, "\n")) : lines
enddef

# The `contents` member of a diff_decision, in JSON: lines holding NULs (a NL in a line's text:
# Vim's json_encode() would write it as a line break, \n) written with each as \u0000.
def ContentsJson(lines: list<string>, nl: string, eol: bool): string
  var encoded = mapnew(lines, (_, l) => substitute(json_encode(l)[1 : -2],
    '\\\@<!\%(\\\\\)*\zs\\n', '\\u0000', 'g'))
  return '"' .. join(encoded, nl ==# "\n" ? '\n' : '\r\n') .. (eol ? (nl ==# "\n" ? '\n' : '\r\n') : '') .. '"'
enddef

def Refuse(id: number, why: string)
  bridge.Respond(id, {error: why})
  bridge.Error(why)
enddef

# `nul`: what became of the NULs of claude's text (claude_ide_bridge.vim, Decode): '' (none),
# 'kept' (each is NUL_STANDIN in `new_file_contents`), 'lost' (dropped by json_decode()).
export def Open(id: number, args: dict<any>, nul: string = '')
  var path: string = args.new_file_path
  var old_path: string = get(args, 'old_file_path', path)
  for p in uniq(sort([path, old_path]))
    var b = context.BufOf(p)
    if b > 0 && getbufvar(b, '&modified')
      Refuse(id, 'Vim refused the change to ' .. p .. ': its buffer has unsaved changes.'
        .. ' Save or undo them in Vim, then propose the change again.')
      return
    endif
  endfor
  var layout = bridge.Option('diff_layout', 'vertical')
  var back = win_getid()
  var tab = 0
  # Vim compares all the windows in diff mode of a tab page together: a diff while another one is
  # shown there (or the user's own) gets a tab page of its own.
  if layout ==# 'tab' || !empty(filter(range(1, winnr('$')), (_, n) => getwinvar(n, '&diff')))
    tabnew
    setlocal bufhidden=wipe
    tab = tabpagenr()
  else
    var w = terminal.EditWindow(true)
    win_gotoid(w)
  endif
  var main = win_getid()
  var prev_buf = bufnr()
  var old_scratch = !filereadable(old_path)
  if old_scratch
    hide enew
    setlocal buftype=nofile bufhidden=wipe noswapfile nobuflisted
    execute 'silent file ' .. fnameescape(path .. ' (new file #' .. id .. ')')
    execute 'silent! doautocmd filetypedetect BufNewFile ' .. fnameescape(path)
    # The file does not exist: what is typed here would go nowhere (it is no file, and goes with
    # the diff). Vim says E21 to a change; the buffer's name says why.
    setlocal nomodifiable
  else
    files.Edit(old_path)
  endif
  var old_buf = bufnr()
  diffthis
  var ft = &filetype
  execute (layout ==# 'horizontal' ? 'belowright new' : 'belowright vertical new')
  setlocal buftype=acwrite bufhidden=wipe noswapfile nobuflisted
  execute 'silent file ' .. fnameescape(path .. ' (proposed by claude #' .. id .. ')')
  var contents: string = args.new_file_contents
  # Split as the file's buffer reads its own text: a file read with its CRs shown ('fileformat'
  # unix: an LF file, or 'fileformats' without dos) gets a proposal with them shown too, so that
  # only what changes differs (and a change of every line's ending shows as one).
  var file_ff = old_scratch ? '' : getbufvar(old_buf, '&fileformat')
  var crlf = Crlf(contents) && file_ff !=# 'unix'
  # The other way, a CRLF file's endings made LF shows in no line: said.
  var endings = file_ff ==# 'dos' && contents !~# "\r\n" && contents =~# "\n"
    ? ' (its line breaks are LF, the file''s CRLF)' : ''
  setline(1, ProposalLines({contents: contents, nul: nul ==# 'kept', crlf: crlf}))
  # As its lines are split ('fileformats' gives a new buffer dos first on Windows: an LF
  # proposal, edited, was sent back CRLF).
  execute 'setlocal fileformat=' .. (crlf ? 'dos' : 'unix')
  &l:filetype = ft
  setlocal nomodified
  if nul ==# 'lost'
    # Shown without its NULs, it must not be sent back so: accepted unedited, the bridge gives
    # claude's own text (a line that held the stand-in already, which is never so).
    setlocal nomodifiable
  endif
  diffthis
  var proposed = bufnr()
  # ZZ writes only a changed buffer (and the proposal is unchanged until the user edits it): it
  # accepts here, like :wq (and :x, see QuitPre below)
  nnoremap <buffer> <nowait> ZZ <Cmd>ClaudeCodeDiffAccept<CR>
  # `tick`: the proposal's changedtick as claude sent it, to tell whether the user edited it
  diffs[string(id)] = {id: id, path: path, tab_name: get(args, 'tab_name', ''), proposed: proposed,
    old_buf: old_buf, old_scratch: old_scratch, main: main, prev_buf: prev_buf, tab: tab,
    eol: contents =~# "\n$" || contents ==# '', crlf: crlf, wins: [main, win_getid()],
    disk: Disk(path), contents: contents, tick: getbufvar(proposed, 'changedtick'), nul: nul ==# 'kept',
    name: bridge.FullName(bufname(proposed))}
  execute 'augroup claude_ide_bridge_diff_' .. proposed
  autocmd!
  execute 'autocmd BufWriteCmd <buffer=' .. proposed .. '> Written(' .. id
    .. ', expand("<afile>"), v:cmdbang)'
  # :e! reads the proposal again (as claude sent it), not a file of that name
  execute 'autocmd BufReadCmd <buffer=' .. proposed .. '> Reread(' .. id .. ')'
  execute 'autocmd QuitPre <buffer=' .. proposed .. '> Quitting(' .. id .. ')'
  # An edit the buffer holds as it goes without a `!` (`:hide`, which wipes it) is kept.
  execute 'autocmd BufUnload <buffer=' .. proposed .. '> Unloading(' .. id .. ')'
  # The buffer going away rejects; decided once the command is over: :e! unloads it too, and
  # reads it again.
  execute 'autocmd BufUnload,BufWipeout <buffer=' .. proposed .. '> timer_start(0, (_) => Rejected('
    .. id .. '))'
  augroup END
  if !bridge.Option('diff_focus', false)
    win_gotoid(back)
  endif
  # The file's name first: a message longer than the command line is cut in the middle.
  bridge.Info('claude proposes a change to ' .. fnamemodify(path, ':~:.')
    .. (tab > 0 ? ' (tab page ' .. tab .. ')' : '') .. endings
    .. (nul ==# 'lost' ? ': its NUL bytes cannot be shown here (not editable): :w accepts claude''s text'
      : ': :w accepts (with your edits)')
    .. ', :q rejects')
enddef

# What buffer `b` is when the plugin made it (the proposal or the empty left side of a pending
# diff, a buffer keeping an edit of the user's), or '' (files.Save writes only the others).
export def Owned(b: number): string
  for d in values(diffs)
    if d.proposed == b
      return 'claude''s proposal #' .. d.id
    elseif d.old_scratch && d.old_buf == b
      return 'the empty side of the diff of a new file'
    endif
  endfor
  return getbufvar(b, 'claude_ide_bridge_kept', '')
enddef

# The diff the user means: the one shown in the current window or tab page, or the only one.
def Current(): dict<any>
  var buf = bufnr()
  for d in values(diffs)
    if d.proposed == buf
      return d
    endif
  endfor
  var here = tabpagebuflist()
  for d in values(diffs)
    if index(here, d.proposed) >= 0
      return d
    endif
  endfor
  if len(diffs) == 1
    return values(diffs)[0]
  endif
  # (not one expression over two lines: Vim 9.2 fails to compile this one, E109)
  if empty(diffs)
    bridge.Error('no change from claude is pending')
  else
    bridge.Error(len(diffs) .. ' changes are pending: run the command in the one you mean')
  endif
  return {}
enddef

def Take(id: number): dict<any>
  return has_key(diffs, string(id)) ? remove(diffs, string(id)) : {}
enddef

# :w in the proposal (or :ClaudeCodeDiffAccept): FILE_SAVED with what the proposal holds.
export def Accept(id: number)
  var d = Take(id)
  if empty(d)
    return
  endif
  var nl = d.crlf ? "\r\n" : "\n"
  var text = d.contents
  # Unedited, no contents: the bridge answers with claude's proposal byte for byte (Vim's copy
  # of it lost what json_decode drops, NUL characters).
  var decision: dict<any> = {type: 'diff_decision', id: id, decision: 'accept'}
  # (As Vim exits every buffer's changedtick is -1: whether it is modified tells then.)
  var tick = getbufvar(d.proposed, 'changedtick', d.tick)
  # the decision's line when json_encode() cannot write it
  var line = ''
  # Its 'fileformat' set otherwise (`:set ff=unix`, a change of no line): what :w copy.rs writes.
  # (Open and Reread set it from `d.crlf`.)
  var shown_ff = d.crlf ? 'dos' : 'unix'
  var ff = getbufvar(d.proposed, '&fileformat', shown_ff)
  var lines: list<string> = []
  if ff !=# shown_ff || (tick < 0 ? getbufvar(d.proposed, '&modified') : tick != d.tick)
    nl = ff ==# 'dos' ? "\r\n" : "\n"
    # edited by the user: the buffer's lines, and the line break at the end the proposal had
    lines = getbufline(d.proposed, 1, '$')
    # (one empty line is an empty text when the proposal was one)
    var eol = d.eol && !(lines == [''] && d.contents ==# '')
    text = join(lines, nl) .. (eol ? nl : '')
    decision.contents = text
    if match(lines, "\n") >= 0
      # NULs in it (a NL in a line's text), which json_encode() would write as line breaks:
      # written as \u0000 (ContentsJson); for the watch of the file (WatchWrite), as in
      # claude's text read with NULs.
      decision.contents = ''
      var json = ContentsJson(lines, nl, eol)
      line = substitute(json_encode(decision), '"contents":""', (_) => '"contents":' .. json, '')
      text = join(mapnew(lines, (_, l) => tr(l, "\n", NUL_STANDIN)), nl) .. (eol ? nl : '')
      d.nul = true
    endif
  endif
  var went = line ==# '' ? bridge.Send(decision) : bridge.SendLine(line)
  if !went
    # The bridge is stopping or gone: nothing was given (claude is told Vim did not answer).
    # The diff closes as the stop closes it, an edit kept.
    var kept = KeepEdit(d)
    timer_start(0, (_) => Close(d))
    bridge.Error('claude''s change to ' .. fnamemodify(d.path, ':~:.') .. ' was not accepted: the'
      .. ' bridge is stopping' .. (kept ==# '' ? '' : '; your edit is kept in ' .. kept))
    return
  endif
  if !empty(lines)
    Sent(d, lines)
    if Disk(d.path) !=# d.disk
      # The file changed on disk since the diff opened (a formatter, `git checkout`, another
      # editor): claude applies its change to the file as it is now, and may fail to ("String
      # not found in file"), the user's edit gone with the proposal. It is kept, and said.
      var name = Keep(d.path, d.id, lines, getbufvar(d.proposed, '&filetype'),
        'sent while the file changed')
      sent[string(d.id)].kept = name
      bridge.Error(fnamemodify(d.path, ':~:.') .. ' changed on disk since claude proposed its'
        .. ' change: claude may not apply your accepted edit (its terminal says); it is kept in '
        .. name)
    endif
  endif
  setbufvar(d.proposed, '&modified', 0)
  timer_start(0, (_) => Close(d))
  WatchWrite(d, text)
enddef

# The commands typed that write the buffer they are typed in (with a range, and the modifiers a
# user may put before them): :w, :update, :wq, :x.
const WRITE_COMMAND = '^[ \t:]*\%(\%(sil\%[ent]!\=\|keepa\%[lt]\|conf\%[irm]\|lockm\%[arks]\|'
  .. 'keepj\%[umps]\|keepp\%[atterns]\|uns\%[ilent]\|verb\%[ose]\|nos\%[wapfile]\)\s\+\)*'
  .. '[%.$,0-9''<>]*\%(w\%[rite]\|up\%[date]\|wq\|x\%[it]\|exi\%[t]\)!\=\%(\s\|$\||\)'

# Why the write of proposal `d` running now is not the user's accept ('' when it is): one Vim
# makes by itself, of every changed buffer (`:wa`, 'autowrite' before `:!` or `:make`) or of
# this one ('autowrite' before CTRL-Z, a tag jump, `:next`; 'autowriteall' before `:q` or
# `:e`). Any write of it from its own window is the user's while neither option is set; with
# one set, only `:w`, `:update`, `:wq` or `:x` typed there (with a range, a modifier), ZZ, or
# `:xa` anywhere.
def NotTheUsers(d: dict<any>): string
  if typed =~# '^[ \t:]*\%(xa\%[ll]\|wqa\%[ll]\)!\=\s*$'
    return ''
  elseif typed =~# '^[ \t:]*wa\%[ll]!\=\s*$'
    return ':wa'
  elseif bufnr() != d.proposed
    return 'a write of every changed buffer'
  elseif (&autowrite || &autowriteall) && typed !~# WRITE_COMMAND
    return '''autowrite'' or ''autowriteall'' (or a command typed that is not :w)'
  endif
  return ''
enddef

# A write of the proposal: to its own name (:w, :wq, :x) it accepts; to another file (`:w
# copy.rs`) it writes the proposal there, as Vim would, and decides nothing. (A range written to
# a file, `:'<,'>w part.rs`, is a FileWriteCmd: Vim writes it itself.)
def Written(id: number, file: string, bang: bool)
  var d = get(diffs, string(id), {})
  var target = bridge.FullName(file)
  # (Its name as opened: `:saveas copy.rs` renames the buffer before it writes.)
  if empty(d) || target ==# d.name
    var by = empty(d) ? '' : NotTheUsers(d)
    if by !=# ''
      # Left changed: Vim goes on as for a write that did not happen (`:q` refuses, E37).
      bridge.Error('claude''s change to ' .. fnamemodify(d.path, ':~:.') .. ' is not accepted by '
        .. by .. ': :w in the proposal accepts it, :q rejects it')
      return
    endif
    Accept(id)
    return
  endif
  if !bang && (filereadable(target) || isdirectory(target))
    bridge.Error('E13: File exists (add ! to override): ' .. file)
    return
  endif
  var lines = getbufline(d.proposed, 1, '$')
  if getbufvar(d.proposed, '&fileformat') ==# 'dos'
    map(lines, (_, l) => l .. "\r")
  endif
  if writefile(lines, target) != 0
    bridge.Error('cannot write ' .. file)
    return
  endif
  if bridge.FullName(bufname(d.proposed)) !=# d.name
    # `:saveas copy.rs` renamed the proposal (its old name left to a buffer of its own, which
    # would be reported as an open file): it keeps its name, as after `:w copy.rs`, and `:w`
    # still accepts it.
    timer_start(0, (_) => Renamed(d))
  endif
  bridge.Info('the proposal written to ' .. fnamemodify(target, ':~:.') .. ' (not accepted: :w alone accepts it)')
enddef

def Renamed(d: dict<any>)
  if !bufexists(d.proposed) || !has_key(diffs, string(d.id))
    return
  endif
  # (By its exact name: `bufnr()` takes a name as a pattern, `[` or `*` in it match others.)
  for left in getbufinfo()
    if left.name ==# d.name && left.bufnr != d.proposed && !left.loaded
      execute 'silent! bwipeout ' .. left.bufnr
    endif
  endfor
  var wins = win_findbuf(d.proposed)
  if !empty(wins)
    win_execute(wins[0], 'silent! keepalt file ' .. fnameescape(d.name))
  endif
enddef

def Reject(d: dict<any>)
  bridge.Send({type: 'diff_decision', id: d.id, decision: 'reject'})
  timer_start(0, (_) => Close(d))
enddef

# The proposal's buffer went away (:q, :close, :bwipeout): rejected. Not when it is there again
# (:e! unloads it, and reads it again).
export def Rejected(id: number)
  var d = get(diffs, string(id), {})
  if empty(d) || bufloaded(d.proposed)
    return
  endif
  Reject(Take(id))
  var unsent = get(d, 'unsent', {})
  if !empty(unsent)
    var name = Keep(d.path, d.id, unsent.lines, unsent.filetype, 'not sent')
    bridge.Info('claude''s change to ' .. fnamemodify(d.path, ':~:.') .. ' rejected (its proposal'
      .. ' was closed): your edit is kept in ' .. name)
  endif
enddef

# The proposal's buffer is unloading (BufUnload: its lines still there). An edit it holds goes
# with it by `:hide` ('bufhidden' is wipe): taken, for Rejected to keep; not by a command with
# `!` (`:q!`, `:e!`, `:bwipeout!`), which throws edits away.
def Unloading(id: number)
  var d = get(diffs, string(id), {})
  var b = str2nr(expand('<abuf>'))
  if empty(d) || !getbufvar(b, '&modified') || typed =~# '!'
    return
  endif
  d.unsent = {lines: getbufline(b, 1, '$'), filetype: getbufvar(b, '&filetype')}
enddef

# :e! in the proposal: its text as claude sent it again, and unchanged.
def Reread(id: number)
  var d = get(diffs, string(id), {})
  if empty(d)
    return
  endif
  var b = str2nr(expand('<abuf>'))
  silent deletebufline(b, 1, '$')
  setbufline(b, 1, ProposalLines(d))
  setbufvar(b, '&fileformat', d.crlf ? 'dos' : 'unix')
  setbufvar(b, '&modified', 0)
  # The edit thrown away is not one to keep (Unloading took it: `:e!` from a mapping).
  if has_key(d, 'unsent')
    remove(d, 'unsent')
  endif
  d.tick = getbufvar(b, 'changedtick')
enddef

# The command line the command running now was typed on, '' once Vim waits for the user again:
# Vim does not tell which command quits (the history's last line may be a refused command, or
# one from an earlier session read from viminfo, while ZQ or a mapping quits).
var typed = ''
augroup claude_ide_bridge_typed
  autocmd!
  autocmd CmdlineLeave : Typed()
augroup END

def Typed()
  typed = get(v:event, 'abort', false) ? '' : getcmdline()
  if typed =~# '^[ \t:]*\%(xa\%[ll]\|wqa\%[ll]\)!\=\s*$'
    # Vim refuses these while a job runs in a terminal (E948), claude's too: with no change of
    # claude's pending, claude is stopped first, as :qa stops it. With some, it is claude that
    # writes what is accepted: it keeps running (Vim refuses, after writing the edited
    # proposals, which claude then writes), and the user is told what to do.
    if empty(diffs)
      terminal.StopForQuitAll(typed =~# '!\s*$')
    elseif terminal.Alive()
      timer_start(0, (_) => bridge.Error(len(diffs) .. ' change(s) of claude''s still pending: it'
        .. ' writes what is accepted, so Vim cannot quit while it runs (E948). Decide them (:w or :q'
        .. ' in each), then :xa; or :qa to quit deciding nothing'))
    endif
  endif
  timer_start(0, (_) => {
    typed = ''
  })
enddef

# :x (:xit, :exit) in the proposal: accepts, like :wq (it would write only a changed buffer, and
# quit unanswered, which rejects).
def Quitting(id: number)
  if typed =~# '^[ \t:]*\%(x\%[it]\|exi\%[t]\)!\=\s*$'
    Accept(id)
  endif
enddef

# Vim quits (VimLeavePre, before the bridge is stopped): after `:xa` (`:xall`, `:wqa`, `:wqall`,
# with or without `!`) the user keeps every pending proposal, as :x keeps one: each is accepted.
# Vim writes only the changed ones (an edited proposal is accepted then, by its BufWriteCmd), and
# Vim 9.0 triggers neither QuitPre nor ExitPre for these commands (ExitPre would come before Vim
# may still refuse to quit: a job running in a terminal): the command typed for the command that
# runs now is taken, here, once Vim really quits.
export def QuittingAll()
  if v:dying > 0 || typed !~# '^[ \t:]*\%(xa\%[ll]\|wqa\%[ll]\)!\=\s*$'
    return
  endif
  for id in keys(diffs)
    Accept(str2nr(id))
  endfor
enddef

export def AcceptCurrent()
  var d = Current()
  if !empty(d)
    Accept(d.id)
  endif
enddef

export def DenyCurrent()
  var d = Current()
  if !empty(d)
    Reject(Take(d.id))
  endif
enddef

# The user's edit of this proposal, not sent, is not lost when the diff closes without it: its
# text stays in a buffer of its own, listed, whose name is returned ('' when it was not edited).
def KeepEdit(d: dict<any>): string
  if !bufexists(d.proposed) || !getbufvar(d.proposed, '&modified')
    return ''
  endif
  return Keep(d.path, d.id, getbufline(d.proposed, 1, '$'), getbufvar(d.proposed, '&filetype'),
    'not sent')
enddef

# Keeps `lines`, the user's edit of proposal `id` of `path`, in a listed buffer of its own, and
# returns its name. A name kept before (an earlier bridge's diff of the same number) is not reused.
def Keep(path: string, id: number, lines: list<string>, filetype: string, what: string): string
  var base = path .. ' (your edit of claude''s proposal #' .. id .. ', ' .. what
  var name = base .. ')'
  var n = 1
  while bufexists(name)
    n += 1
    name = base .. ', ' .. n .. ')'
  endwhile
  var b = bufadd(name)
  setbufvar(b, '&buftype', 'nofile')
  setbufvar(b, '&swapfile', 0)
  bufload(b)
  setbufvar(b, '&buflisted', 1)
  setbufvar(b, '&filetype', filetype)
  setbufvar(b, 'claude_ide_bridge_kept', 'a buffer keeping your edit of claude''s proposal #' .. id)
  deletebufline(b, 1, '$')
  setbufline(b, 1, lines)
  return name
enddef

# Accepts sent with the user's edit (id as a string -> what Keep needs): the bridge may still
# refuse one (its check of the path, a bridge too busy, claude withdrawing it meanwhile), with an
# error line that comes later (Refused), when the proposal is gone. Kept for SENT_KEEP seconds,
# past the bridge's own wait for the check (--lsp-start-wait, 10 s unless set), at most
# SENT_MAX of them, and until the bridge ends (ForgetSent): no line says an accept was taken.
var sent: dict<dict<any>> = {}
const SENT_KEEP = 120
const SENT_MAX = 16

def Sent(d: dict<any>, lines: list<string>)
  var key = string(d.id)
  var entry = {id: d.id, path: d.path, lines: lines, filetype: getbufvar(d.proposed, '&filetype'),
    at: reltimefloat(reltime())}
  sent[key] = entry
  timer_start(SENT_KEEP * 1000, (_) => {
    if get(sent, key, {}) is entry
      remove(sent, key)
    endif
  })
  while len(sent) > SENT_MAX
    var oldest = sort(items(sent), (x, y) => x[1].at < y[1].at ? -1 : 1)[0][0]
    remove(sent, oldest)
  endwhile
enddef

export def ForgetSent()
  sent = {}
enddef

# The bridge ended without being asked to (a link that dropped, a crash): the accepts sent with
# the user's edit in the last SENT_KEEP seconds may not have reached it (a line written into a
# link gone silent is lost with the transport Vim kills), and claude, told Vim did not answer,
# asks in its own prompt with its own text. Each edit is kept (Keep); their buffers' names are
# returned, oldest first.
export def KeepSent(): list<string>
  var names = mapnew(sort(values(sent), (x, y) => x.at < y.at ? -1 : 1),
    (_, s) => has_key(s, 'kept') && bufexists(s.kept) ? s.kept
      : Keep(s.path, s.id, s.lines, s.filetype, 'maybe not taken'))
  sent = {}
  return names
enddef

# The bridge could not give an accept (`message`, its error line for `id`): when it carried the
# user's edit, the edit is kept (Keep) and the user told where. Returns whether it did.
export def Refused(id: number, message: string): bool
  if !has_key(sent, string(id))
    return false
  endif
  var s = remove(sent, string(id))
  # (kept already when the file changed meanwhile: that buffer is named)
  var name = has_key(s, 'kept') && bufexists(s.kept) ? s.kept
    : Keep(s.path, s.id, s.lines, s.filetype, 'not taken')
  bridge.Error('your accept of claude''s change to ' .. fnamemodify(s.path, ':~:.')
    .. ' was not taken (' .. message .. '): your edit is kept in ' .. name)
  return true
enddef

# claude withdrew the call (close_tab, closeAllDiffTabs, a new prompt, disconnect). When the user
# accepted in claude's terminal, claude writes the proposal itself then. An edit of the proposal
# the user had not sent is kept (KeepEdit), and said.
export def Cancel(id: number, reason: string)
  var d = Take(id)
  if !empty(d)
    CloseWhenFree([d], (kept) => {
      WatchWrite(d, d.contents)
      if !empty(kept)
        bridge.Info('claude withdrew its change to ' .. d.path .. ': your edit is kept in ' .. kept[0])
      endif
    })
  endif
enddef

# The bridge was stopped (:ClaudeCodeStop, Vim quitting): every diff closes; the edits the user
# had not sent are kept (KeepEdit), and Said is given their buffers' names.
export def CloseAll(Said: func(list<string>))
  CloseWhenFree(TakeAll(), Said)
enddef

# Every pending diff, taken from `diffs` (Take).
def TakeAll(): list<dict<any>>
  return mapnew(keys(diffs), (_, id) => Take(str2nr(id)))
enddef

# The bridge ended without being asked to (a link that dropped, a crash): the diffs close with no
# answer from Vim (the bridge cannot carry one now; a bridge that stops answers claude itself).
# The edits the user had not sent are kept, as by CloseAll. claude asks in its own prompt then,
# and writes the file once answered there, minutes later maybe: each file is watched for
# UNANSWERED_WATCH seconds, its buffer read again when claude wrote it (Reload: not over unsaved
# changes), so that an edit of the old text does not write over claude's.
export def CloseUnanswered(Said: func(list<string>))
  var ds = TakeAll()
  CloseWhenFree(ds, (kept) => {
    for d in ds
      WatchWrite(d, d.contents, 1000, UNANSWERED_WATCH)
    endfor
    Said(kept)
  })
enddef
const UNANSWERED_WATCH = 600

# Closes the diffs `ds` (taken from `diffs` already), keeping the edits of their proposals the user
# had not sent (KeepEdit), then calls Said with the names of the buffers that keep them. Not while
# the user types, selects, has typed an operator or is on the command line (bridge.Holding(),
# which holds tool calls too): the window would go from under them, and their next keys (text
# typed, `:%s`, the motion of `d`) would land in their file. Once they are done, from what the
# proposal holds then: what they typed meanwhile is kept too.
def CloseWhenFree(ds: list<dict<any>>, Said: func(list<string>))
  if bridge.Holding()
    timer_start(50, (_) => CloseWhenFree(ds, Said))
    return
  endif
  var kept: list<string> = []
  for d in ds
    var name = KeepEdit(d)
    if name !=# ''
      add(kept, name)
    endif
    Close(d)
  endfor
  Said(kept)
enddef

# The tab pages that show the proposal of a pending diff.
def ProposalTabs(): list<number>
  var tabs: list<number> = []
  for d in values(diffs)
    tabs += mapnew(win_findbuf(d.proposed), (_, w) => win_id2tabwin(w)[0])
  endfor
  return tabs
enddef

# Closes the diff's windows and gives the main window its buffer back.
def Close(d: dict<any>)
  if d.tab > 0
    var tabnr = win_id2tabwin(d.main)[0]
    if tabnr > 0 && tabpagenr('$') > 1
      execute 'silent! tabclose! ' .. tabnr
    endif
  endif
  # the user showed another buffer in the file's window
  var left = !d.old_scratch && win_id2tabwin(d.main)[0] > 0 && winbufnr(d.main) != d.old_buf
  if win_id2tabwin(d.main)[0] > 0 && bufexists(d.prev_buf) && d.prev_buf != d.old_buf
      && winbufnr(d.main) == d.old_buf
    # diff mode off first: the window keeps its options for the buffer it leaves, and would
    # bring them back (diff, scrollbind, folds) the next time it shows the file
    win_execute(d.main, 'diffoff')
    win_execute(d.main, 'silent! hide buffer ' .. d.prev_buf)
  endif
  # Diff mode off in the windows this diff put in it, whatever they show now (the user may have
  # shown another buffer there), and in the file's windows; not where another diff is shown.
  var others = ProposalTabs()
  for w in d.wins + (d.old_scratch ? [] : win_findbuf(d.old_buf))
    var tabnr = win_id2tabwin(w)[0]
    if tabnr > 0 && index(others, tabnr) < 0 && gettabwinvar(tabnr, w, '&diff')
      win_execute(w, 'diffoff')
    endif
  endfor
  # The file's window, which shows another buffer now, keeps the file's options of the diff
  # (diff, scrollbind, folds), and brings them back when it shows the file again.
  if left
    augroup claude_ide_bridge_diff_left
      execute 'autocmd! * <buffer=' .. d.old_buf .. '>'
      execute 'autocmd BufWinEnter <buffer=' .. d.old_buf .. '> LeftDiffOff(' .. d.old_buf .. ', '
        .. d.main .. ')'
    augroup END
  endif
  if bufexists(d.proposed)
    # the cursor in the proposal goes to the file's window, not wherever Vim would put it (the
    # claude terminal, in Terminal-Job mode, where the next keys would go to claude)
    if winbufnr(0) == d.proposed && win_id2tabwin(d.main)[0] == tabpagenr()
      win_gotoid(d.main)
    endif
    execute 'silent! bwipeout! ' .. d.proposed
  endif
  if d.old_scratch && bufexists(d.old_buf)
    execute 'silent! bwipeout! ' .. d.old_buf
  endif
  context.ScheduleEditors()
enddef

# Buffer `buf` is shown again in window `win`, which it left in the diff mode of a diff closed
# since: diff mode off (a new diff of the file turns it on again).
def LeftDiffOff(buf: number, win: number)
  if win_getid() != win
    return
  endif
  execute 'autocmd! claude_ide_bridge_diff_left * <buffer=' .. buf .. '>'
  if &diff
    diffoff
  endif
enddef

# The lines of a file as readfile() reads them in binary mode ([] when it does not exist).
def Disk(path: string): list<string>
  return filereadable(path) ? readfile(path, 'b') : []
enddef

# After an accept (with :w, or in claude's terminal), claude writes the file itself: the file's
# buffer shows it once it did. Written is `text`, or (a hook that formats it) something else than
# the file held when the diff opened, once it stays the same for a moment. Looked at every
# `every` ms, `times` times (10 s by default: claude writes at once after an accept).
def WatchWrite(d: dict<any>, text: string, every: number = 100, times: number = 100)
  var want = split(text, "\n", true)
  if d.nul
    map(want, (_, l) => tr(l, NUL_STANDIN, "\n"))
  endif
  var last = d.disk
  var last_size = getfsize(d.path)
  var tries = 0
  var Check: func
  Check = (timer) => {
    tries += 1
    # The file is read again when its size changed, and every tenth look besides (a write of
    # the same size): not ten times a second for the ten seconds a rejected diff is watched.
    var size = getfsize(d.path)
    if size == last_size && tries % 10 != 0 && tries < times
      return
    endif
    last_size = size
    var now = Disk(d.path)
    if now ==# want || (now !=# d.disk && now ==# last) || tries >= times
      timer_stop(timer)
      if now ==# want && get(sent, string(d.id), {path: ''}).path ==# d.path
        # written as accepted: taken (KeepSent has nothing to keep of it)
        remove(sent, string(d.id))
      endif
      if now !=# d.disk
        Reload(d.path)
      endif
    endif
    last = now
  }
  timer_start(every, Check, {repeat: times})
enddef

# Shows what claude wrote in the file's buffer, unless the buffer has unsaved changes: the user
# is told then. :checktime reads the file again when its time or size tell it changed; a write
# they do not tell (of the old text's size, within the same tick of the file system's clock as
# Vim's read, or the same second where the file system keeps no finer times) is read with :edit.
def Reload(path: string)
  var b = context.BufOf(path)
  if b <= 0 || !bufloaded(b)
    return
  endif
  if getbufvar(b, '&modified')
    bridge.Error('claude wrote ' .. fnamemodify(path, ':~:.') .. ', which has unsaved changes in'
      .. ' Vim: not reloaded (:e! loads what claude wrote, :w writes your version over it)')
    return
  endif
  var tick = getbufvar(b, 'changedtick')
  files.ReadIfChanged(b)
  if getbufvar(b, 'changedtick') != tick
    return
  endif
  var wins = win_findbuf(b)
  if !empty(wins)
    files.Reread(wins[0])
  else
    # hidden: read once it is shown again (after the command that shows it)
    augroup claude_ide_bridge_reload
      execute 'autocmd! * <buffer=' .. b .. '>'
      execute 'autocmd BufWinEnter <buffer=' .. b .. '> ++once timer_start(0, (_) => Reload('
        .. string(path) .. '))'
    augroup END
  endif
enddef
