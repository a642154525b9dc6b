vim9script noclear
# claude-ide-bridge: Claude Code's IDE integration for Vim 9 (:help claude-ide-bridge).
# Commands and mappings only; everything else loads on first use from autoload/. Each command
# first lets its own errors show again (bridge.Fresh). `noclear`: sourced again (`:source
# $MYVIMRC` with a `packadd`), the imports the commands use stay while the guard below stops.

if exists('g:loaded_claude_ide_bridge') || v:version < 900 || !has('job') || !has('channel')
  finish
endif
g:loaded_claude_ide_bridge = 1

import autoload 'claude_ide_bridge.vim' as bridge
import autoload 'claude_ide_bridge/context.vim'
import autoload 'claude_ide_bridge/diff.vim'
import autoload 'claude_ide_bridge/terminal.vim'

command! -nargs=* -complete=file ClaudeCode bridge.Fresh() | terminal.Toggle(<q-args>)
command! -nargs=* -complete=file ClaudeCodeFocus bridge.Fresh() | terminal.Focus(<q-args>)
command! -nargs=* -complete=file ClaudeCodeOpen bridge.Fresh() | terminal.Show(true, <q-args>)
command! -nargs=0 -bar ClaudeCodeClose bridge.Fresh() | terminal.Close()
command! -range -bar ClaudeCodeSend bridge.Fresh() | context.SendRange(<line1>, <line2>)
# Not -complete=file, which makes Vim expand `%` and `#` anywhere in the names (`#notes.md` fails
# with E194): the names are the plugin's to read (context.Add), and completed as files.
def CompleteAdd(lead: string, line: string, pos: number): list<string>
  return mapnew(getcompletion(lead, 'file'), (_, f) => escape(f, ' \'))
enddef
command! -nargs=+ -complete=customlist,CompleteAdd ClaudeCodeAdd bridge.Fresh() | context.Add([<f-args>])
command! -nargs=0 -bar ClaudeCodeDiffAccept bridge.Fresh() | diff.AcceptCurrent()
command! -nargs=0 -bar ClaudeCodeDiffDeny bridge.Fresh() | diff.DenyCurrent()
command! -nargs=0 -bar ClaudeCodeStart bridge.Fresh() | bridge.Start()
command! -nargs=0 -bar ClaudeCodeStop bridge.Fresh() | bridge.Stop()
command! -nargs=0 -bar ClaudeCodeStatus bridge.Fresh() | bridge.Status()

nnoremap <silent> <Plug>(claude-code) <Cmd>ClaudeCode<CR>
nnoremap <silent> <Plug>(claude-code-focus) <Cmd>ClaudeCodeFocus<CR>
tnoremap <silent> <Plug>(claude-code-focus) <Cmd>ClaudeCodeFocus<CR>
xnoremap <silent> <Plug>(claude-code-send) :ClaudeCodeSend<CR>
nnoremap <silent> <Plug>(claude-code-diff-accept) <Cmd>ClaudeCodeDiffAccept<CR>
nnoremap <silent> <Plug>(claude-code-diff-deny) <Cmd>ClaudeCodeDiffDeny<CR>

def Map(mode: string, lhs: string, plug: string)
  if !hasmapto(plug, mode) && maparg(lhs, mode) ==# ''
    execute mode .. 'map ' .. lhs .. ' ' .. plug
  endif
enddef

if !get(g:, 'claude_ide_bridge_no_mappings', false)
  Map('n', '<Leader>ac', '<Plug>(claude-code)')
  Map('n', '<Leader>af', '<Plug>(claude-code-focus)')
  Map('x', '<Leader>as', '<Plug>(claude-code-send)')
  Map('n', '<Leader>aa', '<Plug>(claude-code-diff-accept)')
  Map('n', '<Leader>ad', '<Plug>(claude-code-diff-deny)')
endif

if get(g:, 'claude_ide_bridge_auto_start', false)
  autocmd VimEnter * ++once bridge.Start()
endif
