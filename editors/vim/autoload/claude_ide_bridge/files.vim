vim9script
# claude's file tools answered by Vim: openFile, open_files, saveDocument.

import autoload 'claude_ide_bridge.vim' as bridge
import autoload 'claude_ide_bridge/context.vim'
import autoload 'claude_ide_bridge/diff.vim'
import autoload 'claude_ide_bridge/remote.vim'
import autoload 'claude_ide_bridge/terminal.vim'

var swap_found = false
var changed_on_disk = false

# Runs F without Vim's question about a swap file, which a tool call cannot wait for: when another
# Vim edits the file (or one crashed), it opens read-only. Returns whether there was a swap file.
def WithoutSwapQuestion(F: func()): bool
  swap_found = false
  augroup claude_ide_bridge_swap
    autocmd!
    autocmd SwapExists * v:swapchoice = 'o' | swap_found = true
  augroup END
  try
    F()
  finally
    augroup claude_ide_bridge_swap
      autocmd!
    augroup END
  endtry
  return swap_found
enddef

# Reads the file of buffer `b` (loaded, unmodified) again when its time or size tell it changed
# on disk (:checktime with 'autoread'), without Vim's question (W11), which a tool call cannot wait
# for.
export def ReadIfChanged(b: number)
  var ar = getbufvar(b, '&autoread')
  setbufvar(b, '&autoread', 1)
  execute 'silent! checktime ' .. b
  setbufvar(b, '&autoread', ar)
enddef

# `:hide edit path` in the current window, without the swap file question: the user is told when
# the file opened read-only. A hidden buffer of the file, unmodified, is read again first when the
# file changed on disk (claude's own tools write files): what is shown is the file's text now.
export def Edit(path: string)
  var b = context.BufOf(path)
  if b > 0 && bufloaded(b) && !getbufvar(b, '&modified')
    ReadIfChanged(b)
  endif
  if WithoutSwapQuestion(() => {
      execute 'hide edit ' .. fnameescape(path)
    })
    bridge.Info(fnamemodify(path, ':~:.') .. ' has a swap file (another Vim edits it, or one'
      .. ' crashed): opened read-only')
  endif
enddef

# Reads the file of the (unmodified) buffer shown in window `win` again: `:edit`, which keeps its
# undo history ('undoreload'), the cursor line and the window's diff mode.
export def Reread(win: number)
  WithoutSwapQuestion(() => {
    win_execute(win, 'silent edit')
  })
enddef

# Shows `path` in the edit window (created beside the terminal when there is none).
def Show(path: string)
  win_gotoid(terminal.EditWindow(true))
  if context.BufOf(path) != bufnr()
    Edit(path)
  endif
enddef

# Whether the file of buffer `b` changed on disk since Vim read it (found with :checktime, without
# the question `:update` would then ask). :checktime tells it once: it then takes the file's new
# time as seen, while `:update` still compares with the time Vim read it at, and would ask "Do you
# really want to write to it". So what it found is kept (KeepChanged) until the buffer is read or
# written again.
def ChangedOnDisk(b: number): bool
  if getbufvar(b, 'claude_ide_bridge_changed_on_disk', false)
    return true
  endif
  changed_on_disk = false
  augroup claude_ide_bridge_save
    autocmd!
    execute 'autocmd FileChangedShell <buffer=' .. b .. '> changed_on_disk = true | v:fcs_choice = ""'
  augroup END
  try
    execute 'silent checktime ' .. b
  finally
    augroup claude_ide_bridge_save
      autocmd!
    augroup END
  endtry
  if changed_on_disk
    KeepChanged(b)
  endif
  return changed_on_disk
enddef

def KeepChanged(b: number)
  setbufvar(b, 'claude_ide_bridge_changed_on_disk', true)
  augroup claude_ide_bridge_changed_on_disk
    execute 'autocmd! * <buffer=' .. b .. '>'
    execute 'autocmd BufReadPost,BufWritePost <buffer=' .. b .. '> ++once'
      .. ' unlet! b:claude_ide_bridge_changed_on_disk'
  augroup END
enddef

# The same when Vim's own check (on focus, after a shell command, :checktime) found the file
# changed and the buffer was kept (the user chose OK to W11, W12 or W16): Vim takes the new time
# as seen there too, whether or not the buffer had unsaved changes yet. Not when the buffer was
# read again (Load, 'autoread': BufReadPost comes first), nor when only the file's time changed
# (Vim then takes it as the time the file was read at) or only its mode (W16 for a `chmod`: the
# file's time is the one read, and a write does not ask).
export def WatchDisk()
  augroup claude_ide_bridge_disk
    autocmd!
    autocmd BufReadPost * Read(str2nr(expand('<abuf>')))
    autocmd FileChangedShellPost * Kept(str2nr(expand('<abuf>')))
  augroup END
enddef

# Buffers read since Vim last waited for a key. Vim's question about a changed file waits for one
# (and runs timers) before it reads the file again, so a buffer listed here when its
# FileChangedShellPost comes was read by that check.
var just_read: list<number> = []
# The timer that empties it (started again when it is gone: another plugin's timer_stopall()).
var clearing = -1

def Read(b: number)
  if empty(just_read) || empty(timer_info(clearing))
    clearing = timer_start(0, (_) => {
      just_read = []
    })
  endif
  add(just_read, b)
enddef

def Kept(b: number)
  if empty(timer_info(clearing))
    just_read = []
  endif
  if index(just_read, b) < 0 && index(['time', 'mode'], v:fcs_reason) < 0
    KeepChanged(b)
  endif
enddef

# The [line, col] (1-based, byte) where `text` starts at or after `from`, or [] ; with `at_end`,
# where it ends.
def Find(text: string, from: list<number>, at_end: bool): list<number>
  cursor(from[0], from[1])
  # the text as it is: not a pattern, and its case too whatever 'ignorecase' says
  var pat = '\V\C' .. substitute(escape(text, '\'), "\n", '\\n', 'g')
  var pos = searchpos(pat, 'cW' .. (at_end ? 'e' : ''))
  return pos[0] == 0 ? [] : pos
enddef

# Marks from `first` to `last` ([line, col], inclusive) as the last Visual selection ('< and '>,
# `gv` selects it), the cursor at its start, and says so. Not in Visual mode: the focus moved
# here from claude's terminal, and the keys typed next for claude (`c`, `d`, `s`) would act on
# the selection; nor would a proposal open while Vim is in Visual mode (bridge.Holding).
def Select(first: list<number>, last: list<number>, linewise: bool)
  execute "silent! normal! \<Esc>"
  cursor(last[0], last[1])
  execute 'normal! ' .. (linewise ? 'V' : 'v') .. "\<Esc>"
  setpos("'<", [0, first[0], first[1], 0])
  setpos("'>", [0, last[0], last[1], 0])
  cursor(first[0], first[1])
  var which = first[0] == last[0] ? 'line ' .. first[0] : 'lines ' .. first[0] .. '-' .. last[0]
  bridge.Info('claude showed ' .. which .. ' of ' .. expand('%:~:.') .. ' (gv selects them)')
enddef

# The buffer's line (1-based) of a 0-based line of the protocol, within the buffer: clamped
# before adding one, which would overflow for the largest number (2^63-1, E475 then).
def LineOf(line: number): number
  return line >= line('$') ? line('$') : line < 0 ? 1 : line + 1
enddef

export def OpenFile(id: number, args: dict<any>)
  var path = fnamemodify(args.filePath, ':p')
  # A regular file only: Vim opening a FIFO waits in open() for a writer (the bridge refuses
  # one before it comes here; an older bridge did not).
  if !filereadable(path) || getftype(resolve(path)) !=# 'file'
    bridge.Respond(id, {error: 'File not found: ' .. args.filePath})
    return
  endif
  var frontmost = get(args, 'makeFrontmost', true) ? true : false
  if !frontmost
    # in the background: loaded and listed (an open editor), no window changes
    var b = bufadd(path)
    setbufvar(b, '&buflisted', 1)
    bufload(b)
    context.ScheduleEditors()
    bridge.RespondJson(id, {success: true, filePath: remote.ForClaude(path),
      languageId: context.LanguageId(b), lineCount: len(getbufline(b, 1, '$'))})
    return
  endif
  Show(path)
  var start_text = get(args, 'startText', '')
  if type(start_text) == v:t_string && start_text !=# ''
    var first = Find(start_text, [1, 1], false)
    if !empty(first)
      var last = Find(start_text, first, true)
      var end_text = get(args, 'endText', '')
      if type(end_text) == v:t_string && end_text !=# ''
        var e = Find(end_text, last, true)
        if !empty(e)
          last = e
        endif
      endif
      if get(args, 'selectToEndOfLine', false)
        last = [last[0], max([1, strlen(getline(last[0]))])]
      endif
      Select(first, last, false)
    endif
  elseif type(get(args, 'startLine', v:null)) == v:t_number
    # lines are 0-based, like every position on this protocol
    var l1 = LineOf(args.startLine)
    var l2 = type(get(args, 'endLine', v:null)) == v:t_number ? LineOf(args.endLine) : l1
    if l2 > l1
      Select([l1, 1], [l2, 1], true)
    else
      cursor(l1, 1)
    endif
  endif
  normal! zv
  context.ScheduleEditors()
  bridge.Respond(id, {text: 'Opened file: ' .. remote.ForClaude(path)})
enddef

export def OpenFiles(id: number, args: dict<any>)
  var opened: list<string> = []
  var back = win_getid()
  for p in get(args, 'file_paths', [])
    var path = fnamemodify(p, ':p')
    if filereadable(path) && getftype(resolve(path)) ==# 'file'
      Show(path)
      add(opened, path)
    endif
  endfor
  win_gotoid(back)
  context.ScheduleEditors()
  bridge.RespondJson(id, {opened_files: mapnew(opened, (_, p) => remote.ForClaude(p))})
enddef

export def Save(id: number, args: dict<any>)
  var path = fnamemodify(args.filePath, ':p')
  var b = context.BufOf(path)
  var answer = {success: true, filePath: remote.ForClaude(path), saved: false, message: ''}
  var owned = b > 0 ? diff.Owned(b) : ''
  if owned !=# ''
    # Not a document: writing a proposal accepts it (its BufWriteCmd), and a tool that is not a
    # decision must not decide a diff; the user does.
    answer.success = false
    answer.message = 'Vim did not save it: it is ' .. owned .. ', not a file'
  elseif b <= 0 || !bufloaded(b)
    if !filereadable(path)
      bridge.Respond(id, {error: 'Document not open: ' .. args.filePath})
      return
    endif
    answer.message = 'Not open in Vim: the file on disk is current'
  elseif !getbufvar(b, '&modified')
    answer.message = 'No unsaved changes in Vim'
  elseif ChangedOnDisk(b)
    # Both changed: writing would lose what is on disk, so the user decides.
    var name = fnamemodify(path, ':~:.')
    bridge.Error(name .. ' changed on disk while Vim has unsaved changes to it: not saved for claude'
      .. ' (:w writes your version over it, :e! loads the file)')
    answer.success = false
    answer.message = 'Vim did not save it: the file changed on disk since Vim read it, and Vim'
      .. ' has unsaved changes to it'
  else
    var wins = win_findbuf(b)
    try
      if !empty(wins)
        win_execute(wins[0], 'silent update')
      else
        # A hidden buffer is written from a window of the tab page, shown there for the write;
        # one made for it (only claude's terminal was shown) goes again, and the focus stays.
        var back = win_getid()
        var existing = terminal.EditWindow(false)
        var w = existing != 0 ? existing : terminal.EditWindow(true)
        var prev = winbufnr(w)
        win_execute(w, 'silent hide buffer ' .. b .. ' | silent update | silent hide buffer ' .. prev)
        if existing == 0
          win_execute(w, 'close')
        endif
        win_gotoid(back)
      endif
    catch
      bridge.RespondJson(id, {success: false, filePath: remote.ForClaude(path), saved: false,
        message: 'Vim could not save it: ' .. v:exception})
      return
    endtry
    var ok = !getbufvar(b, '&modified')
    answer.success = ok
    answer.saved = ok
    answer.message = ok ? 'Saved by Vim' : 'Vim could not save it'
  endif
  context.SendEditors()
  bridge.RespondJson(id, answer)
enddef
