vim9script
# claude-ide-bridge for Vim: Claude Code's IDE integration through `claude-ide-bridge serve --stdio`.
#
#   :source examples/vim/claude-ide-bridge.vim   (or copy it to ~/.vim/plugin/)
#   :ClaudeBridgeStart [DIR]    serve DIR (default: the current directory); then run `claude` in DIR
#   :'<,'>ClaudeSelection       tell claude about the visual selection (also: visual-mode <Leader>cs)
#   :ClaudeAccept / :ClaudeReject   decide the proposed change shown with :diffsplit
#   :ClaudeBridgeStop
#
# g:claude_ide_bridge_cmd names the program (default "claude-ide-bridge").

g:claude_bridge_port = 0
g:claude_pending = {}
var job: job = null_job

def Send(msg: dict<any>)
  if job_status(job) == 'run'
    ch_sendraw(job_getchannel(job), json_encode(msg) .. "\n")
  endif
enddef

def ShowDiff(id: number, args: dict<any>)
  var path = args.new_file_path
  execute 'tabnew ' .. fnameescape(args.old_file_path)
  diffthis
  vnew
  setlocal buftype=nofile bufhidden=wipe noswapfile
  execute 'file ' .. fnameescape('[claude] ' .. fnamemodify(path, ':t') .. ' #' .. id)
  setline(1, split(args.new_file_contents, "\n", true)[: -2])
  if args.new_file_contents !~ "\n$"
    setline(1, split(args.new_file_contents, "\n", true))
  endif
  diffthis
  b:claude_diff_id = id
  g:claude_pending[id] = {bufnr: bufnr(), path: path, tab: tabpagenr()}
  echomsg 'claude proposes a change to ' .. path .. ': :ClaudeAccept or :ClaudeReject'
enddef

def CloseDiff(id: number)
  if !has_key(g:claude_pending, id)
    return
  endif
  var p = remove(g:claude_pending, id)
  for t in range(1, tabpagenr('$'))
    if index(tabpagebuflist(t), p.bufnr) >= 0
      execute 'tabclose! ' .. t
      break
    endif
  endfor
enddef

def CurrentId(): number
  if exists('b:claude_diff_id')
    return b:claude_diff_id
  endif
  for [id, p] in items(g:claude_pending)
    if index(tabpagebuflist(), p.bufnr) >= 0
      return str2nr(id)
    endif
  endfor
  return -1
enddef

def Decide(decision: string)
  var id = CurrentId()
  if id < 0
    echoerr 'no proposed change in this tab'
    return
  endif
  var p = g:claude_pending[id]
  var msg: dict<any> = {type: 'diff_decision', id: id, decision: decision}
  if decision == 'accept'
    msg.contents = join(getbufline(p.bufnr, 1, '$'), "\n") .. "\n"
  endif
  Send(msg)
  CloseDiff(id)
  if decision == 'accept' && bufexists(p.path)
    execute 'checktime ' .. bufnr(p.path)
  endif
enddef

def OnLine(ch: channel, line: string)
  var msg: any
  try
    msg = json_decode(line)
  catch
    return
  endtry
  if type(msg) != v:t_dict
    return
  endif
  if msg.type == 'ready'
    g:claude_bridge_port = msg.port
    echomsg 'claude-ide-bridge: port ' .. msg.port
  elseif msg.type == 'tool_call'
    if msg.name == 'openDiff'
      ShowDiff(msg.id, msg.arguments)
    elseif msg.name == 'openFile'
      execute 'tab drop ' .. fnameescape(msg.arguments.filePath)
      if has_key(msg.arguments, 'startLine')
        cursor(msg.arguments.startLine + 1, 1)
      endif
      Send({type: 'respond', id: msg.id, text: 'Opened file: ' .. msg.arguments.filePath})
    elseif msg.name == 'open_files'
      for f in msg.arguments.file_paths
        execute 'tab drop ' .. fnameescape(f)
      endfor
      Send({type: 'respond', id: msg.id, text: json_encode({opened_files: msg.arguments.file_paths})})
    elseif msg.name == 'saveDocument' && bufexists(msg.arguments.filePath)
      execute 'silent! ' .. bufnr(msg.arguments.filePath) .. 'bufdo update'
      Send({type: 'respond', id: msg.id, text: json_encode({success: true, filePath: msg.arguments.filePath, saved: true, message: 'saved by Vim'})})
    else
      Send({type: 'respond', id: msg.id, error: msg.name .. ' is not supported by the Vim plugin'})
    endif
  elseif msg.type == 'cancelled'
    CloseDiff(msg.id)
  elseif msg.type == 'error'
    echomsg 'claude-ide-bridge: ' .. msg.message
  endif
enddef

def Start(dir: string)
  if job_status(job) == 'run'
    echomsg 'claude-ide-bridge already runs on port ' .. g:claude_bridge_port
    return
  endif
  var cmd = get(g:, 'claude_ide_bridge_cmd', 'claude-ide-bridge')
  var folder = fnamemodify(empty(dir) ? getcwd() : dir, ':p')
  job = job_start([cmd, 'serve', '--stdio', '--ide-name', 'Vim', '--workspace', folder], {
    out_mode: 'nl', out_cb: OnLine, err_io: 'null', in_mode: 'raw'})
enddef

def Stop()
  if job_status(job) == 'run'
    ch_close_in(job_getchannel(job))
  endif
enddef

export def SendSelection(line1: number, line2: number)
  var start = getpos("'<")
  var end = getpos("'>")
  if start[1] != line1 || end[1] != line2
    start = [0, line1, 1, 0]
    end = [0, line2, len(getline(line2)) + 1, 0]
  endif
  var lines = getline(start[1], end[1])
  var ecol = min([end[2], len(lines[-1])])
  lines[-1] = strpart(lines[-1], 0, ecol)
  lines[0] = strpart(lines[0], start[2] - 1)
  Send({type: 'selection_changed', filePath: expand('%:p'), text: join(lines, "\n"),
    selection: {start: {line: start[1] - 1, character: start[2] - 1},
                end: {line: end[1] - 1, character: ecol}}})
enddef

command! -nargs=? -complete=dir ClaudeBridgeStart Start(<q-args>)
command! ClaudeBridgeStop Stop()
command! -range ClaudeSelection SendSelection(<line1>, <line2>)
command! ClaudeAccept Decide('accept')
command! ClaudeReject Decide('reject')
xnoremap <Leader>cs :ClaudeSelection<CR>
