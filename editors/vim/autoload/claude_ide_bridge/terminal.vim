vim9script
# The claude terminal (:ClaudeCode, :ClaudeCodeFocus) and where files and diffs are shown.

import autoload 'claude_ide_bridge.vim' as bridge
import autoload 'claude_ide_bridge/remote.vim'

var term_buf = -1
# A launch waits for the bridge to be ready: another :ClaudeCode meanwhile starts no second one.
var launching = false

# Whether claude runs in its terminal.
export def Alive(): bool
  return term_buf > 0 && bufexists(term_buf) && call('term_getstatus', [term_buf]) =~# 'running'
enddef

# The window of the claude terminal in the current tab page, or 0.
def TermWin(): number
  if term_buf <= 0
    return 0
  endif
  for w in win_findbuf(term_buf)
    if win_id2tabwin(w)[0] == tabpagenr()
      return w
    endif
  endfor
  return 0
enddef

export def Describe(): string
  if !Alive()
    return 'not running (:ClaudeCode starts it)'
  endif
  return 'running in buffer ' .. term_buf .. (TermWin() != 0 ? ', shown' : ', hidden')
enddef

def Side(): string
  var side = bridge.Option('split_side', 'right')
  return index(['left', 'right', 'top', 'bottom'], side) >= 0 ? side : 'right'
enddef

# Opens an empty window on the configured side, sized by g:claude_ide_bridge_split_width_percentage.
def SplitWindow()
  var side = Side()
  var pct = bridge.Option('split_width_percentage', 0.3)
  if side ==# 'left' || side ==# 'right'
    var width = max([20, float2nr(&columns * pct)])
    execute (side ==# 'right' ? 'botright' : 'topleft') .. ' vertical new'
    execute 'vertical resize ' .. width
  else
    var height = max([5, float2nr(&lines * pct)])
    execute (side ==# 'bottom' ? 'botright' : 'topleft') .. ' new'
    execute 'resize ' .. height
  endif
  setlocal bufhidden=wipe
enddef

# The words of `:ClaudeCode`'s arguments, as claude gets them: split at white space, double
# quotes grouping words (`"be brief"`; `\"` and `\\` in them are `"` and `\`), as Vim splits a
# command given as one string. (split() cut `"x y"` into `"x` and `y"` over a remote link.)
export def ArgWords(args: string): list<string>
  var words: list<string> = []
  var word = ''
  var quoted = false
  var any = false
  var i = 0
  var chars = split(args, '\zs')
  while i < len(chars)
    var c = chars[i]
    if quoted && c ==# '\' && i + 1 < len(chars) && (chars[i + 1] ==# '"' || chars[i + 1] ==# '\')
      word ..= chars[i + 1]
      i += 1
    elseif c ==# '"'
      quoted = !quoted
      any = true
    elseif !quoted && c =~# '\s'
      if any || word !=# ''
        add(words, word)
      endif
      word = ''
      any = false
    else
      word ..= c
    endif
    i += 1
  endwhile
  if any || word !=# ''
    add(words, word)
  endif
  return words
enddef

def Launch(args: string, focus: bool)
  if !has('terminal')
    bridge.Error('this Vim has no +terminal: run claude in a shell (claude --ide), the bridge runs')
    return
  endif
  var back = win_getid()
  var argv: any
  var opts: dict<any> = {curwin: true, term_name: 'claude', term_kill: 'term'}
  if remote.On()
    # claude runs on the other side, in the remote workspace, told the remote bridge's port
    argv = remote.TerminalCommand(ArgWords(args), bridge.Port(), bridge.ClaudeHost())
  else
    var cmd = bridge.Option('terminal_cmd', 'claude')
    argv = type(cmd) == v:t_list ? cmd + ArgWords(args) : cmd .. (empty(args) ? '' : ' ' .. args)
    var program = type(cmd) == v:t_list ? get(cmd, 0, '') : get(split(cmd), 0, '')
    if !executable(program)
      bridge.Error(program .. ' was not found: install claude (npm install -g @anthropic-ai/claude-code)'
        .. ' or set g:claude_ide_bridge_terminal_cmd')
      return
    endif
    # (CLAUDE_CODE_AUTO_CONNECT_IDE: set to no in the user's environment, claude would connect to
    # no IDE by itself, Vim included. CLAUDE_CODE_IDE_HOST_OVERRIDE: where the bridge listens
    # when claude's own 127.0.0.1 does not reach it (g:claude_ide_bridge_args with --host ::1);
    # else empty, which claude takes as unset, so that one meant for another IDE is not used.)
    var host = bridge.ClaudeHost()
    opts.env = {CLAUDE_CODE_SSE_PORT: string(bridge.Port()), ENABLE_IDE_INTEGRATION: 'true',
      CLAUDE_CODE_AUTO_CONNECT_IDE: 'true',
      CLAUDE_CODE_IDE_HOST_OVERRIDE: host ==# '127.0.0.1' ? '' : host}
    var folders = bridge.Folders()
    if !empty(folders)
      opts.cwd = folders[0]
    endif
  endif
  SplitWindow()
  # claude ending well closes its window; ending badly leaves it, with what it said on exit.
  var buf = -1
  opts.exit_cb = (_, status) => timer_start(10, (_) => Finished(buf, status))
  try
    # through call(): a Vim without +terminal has no term_start() to compile against
    buf = call('term_start', [argv, opts])
    term_buf = buf
  catch
    bridge.Error('could not start claude: ' .. v:exception)
    close
    win_gotoid(back)
    return
  endtry
  if term_buf <= 0
    bridge.Error('could not start ' .. string(argv) .. ' (set g:claude_ide_bridge_terminal_cmd)')
    return
  endif
  setbufvar(term_buf, '&buflisted', 0)
  setbufvar(term_buf, '&bufhidden', 'hide')
  if !focus
    win_gotoid(back)
  endif
enddef

def Finished(buf: number, status: number)
  if status != 0
    bridge.Error('claude exited with status ' .. status .. ': its window shows why')
    return
  endif
  if !bufexists(buf)
    return
  endif
  for w in win_findbuf(buf)
    if winnr('$') > 1 || tabpagenr('$') > 1
      win_execute(w, 'close')
    endif
  endfor
  execute 'silent! bwipeout! ' .. buf
enddef

def Hide(win: number)
  if winnr('$') == 1 && tabpagenr('$') == 1
    bridge.Error('the claude window is the only window')
    return
  endif
  var cur = win_getid()
  win_gotoid(win)
  hide
  if cur != win
    win_gotoid(cur)
  endif
enddef

# Before `:xa` or `:wqa`: Vim refuses them while a job runs in a terminal (E948, whatever
# `term_kill`), so claude's is stopped (SIGTERM, then SIGKILL after a second), as `:qa` stops it.
# Not when Vim would refuse anyway, keeping claude: another terminal's job, or a changed buffer it
# cannot write (no name; read-only, without `!`).
export def StopForQuitAll(bang: bool)
  if !Alive()
    return
  endif
  for b in getbufinfo()
    var bt = getbufvar(b.bufnr, '&buftype')
    if b.bufnr != term_buf && bt ==# 'terminal' && call('term_getstatus', [b.bufnr]) =~# 'running'
      return
    endif
    if b.changed && bt ==# '' && (b.name ==# '' || (!bang && getbufvar(b.bufnr, '&readonly')))
      return
    endif
  endfor
  var job = call('term_getjob', [term_buf])
  job_stop(job, 'term')
  var waited = 0
  while job_status(job) ==# 'run' && waited < 1000
    sleep 10m
    waited += 10
  endwhile
  if job_status(job) ==# 'run'
    job_stop(job, 'kill')
  endif
enddef

# A bridge that ended while claude runs is started again (by :ClaudeCode, :ClaudeCodeFocus), on
# the same port, where claude's own retry finds it; not one the user stopped (:ClaudeCodeStop).
def Revive()
  if Alive() && !bridge.Running() && !bridge.Starting() && !bridge.StoppedByUser()
    bridge.Start()
  endif
enddef

# Shows the claude terminal (starting it, and the bridge, when needed).
export def Show(focus: bool, args: string = '')
  Revive()
  if !Alive()
    if launching && bridge.Starting()
      return
    endif
    launching = true
    if !bridge.Start(() => {
        launching = false
        Launch(args, focus)
      })
      launching = false
    endif
    return
  endif
  var w = TermWin()
  if w != 0
    if focus
      win_gotoid(w)
    endif
    return
  endif
  var back = win_getid()
  SplitWindow()
  execute 'buffer ' .. term_buf
  if !focus
    win_gotoid(back)
  endif
enddef

# :ClaudeCode [args]: opens claude, or hides/shows its window.
export def Toggle(args: string)
  Revive()
  if Alive() && TermWin() != 0
    Hide(TermWin())
  else
    Show(true, args)
  endif
enddef

# :ClaudeCodeFocus [args]: goes to claude's window; hides it when already there.
export def Focus(args: string)
  Revive()
  var w = TermWin()
  if Alive() && w != 0 && w == win_getid()
    Hide(w)
  else
    Show(true, args)
  endif
enddef

export def Close()
  var w = TermWin()
  if w != 0
    Hide(w)
  endif
enddef

export def IsTerminal(win: number): bool
  return getbufvar(winbufnr(win), '&buftype') ==# 'terminal'
enddef

# A window of the current tab page to show a file in: the previous one when it shows a file, else
# the first such window; with `create`, a new one beside the terminal when there is none.
export def EditWindow(create: bool): number
  var candidates = [win_getid(winnr('#')), win_getid()] + mapnew(range(1, winnr('$')), (_, n) => win_getid(n))
  for w in candidates
    if w != 0 && getbufvar(winbufnr(w), '&buftype') ==# '' && !getwinvar(w, '&previewwindow')
        && win_gettype(w) ==# ''
      return w
    endif
  endfor
  if !create
    return 0
  endif
  var tw = TermWin()
  if tw != 0
    win_gotoid(tw)
    var side = Side()
    execute (side ==# 'right' ? 'leftabove vertical' : side ==# 'left' ? 'rightbelow vertical'
      : side ==# 'bottom' ? 'leftabove' : 'rightbelow') .. ' new'
  else
    new
  endif
  return win_getid()
enddef
