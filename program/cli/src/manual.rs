//! `completions` and `man`: a shell completion script and a man page, both generated from the
//! program's clap [`Command`], the same definitions that parse the arguments and print `--help`,
//! so neither can drift from them.

use std::io::{self, Write};

use clap::{Command, ValueEnum, ValueHint};
use clap_complete::Shell;
use clap_mangen::Man;

/// The shells `completions` writes a script for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    /// PowerShell (Windows PowerShell 5.1 and PowerShell 7): `claude-ide-bridge completions
    /// powershell | Out-String | Invoke-Expression`, or the output saved and dot-sourced from
    /// `$PROFILE`.
    Powershell,
}

impl CompletionShell {
    fn generator(self) -> Shell {
        match self {
            CompletionShell::Bash => Shell::Bash,
            CompletionShell::Zsh => Shell::Zsh,
            CompletionShell::Fish => Shell::Fish,
            CompletionShell::Powershell => Shell::PowerShell,
        }
    }
}

/// The completion script of `cmd` for `shell` (its binary name is `cmd`'s name). Generated in
/// memory: clap_complete panics when its writer fails, and stdout may be a closed pipe.
pub fn completions(mut cmd: Command, shell: CompletionShell) -> Vec<u8> {
    let name = cmd.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(shell.generator(), &mut cmd, name.clone(), &mut script);
    if shell == CompletionShell::Bash {
        script = fix_bash_case_labels(&script, &name);
        for sub in cmd.get_subcommands().filter(|s| takes_a_command(s)) {
            script = complete_a_command_after_dashes(&script, &name, sub.get_name());
        }
    }
    script
}

/// Whether `cmd` ends with a command line of its own after `--` (`run -- claude ...`).
fn takes_a_command(cmd: &Command) -> bool {
    cmd.get_arguments()
        .any(|a| a.is_last_set() && a.get_value_hint() == ValueHint::CommandWithArguments)
}

/// The words after `--` in the subcommand's arm of the bash script: clap_complete's script
/// completes them as the bridge's own options and files whatever their place, so `run -- cl<Tab>`
/// offered the files of the current folder and `run -- claude --<Tab>` the bridge's flags. After
/// `--`, the first word completes as a command name and the rest as that command's arguments:
/// through bash-completion's `_command_offset` when it is loaded (the command's own completion,
/// as `sudo` and `time` do), else as file names.
fn complete_a_command_after_dashes(script: &[u8], bin_name: &str, sub: &str) -> Vec<u8> {
    let script = String::from_utf8_lossy(script);
    let arm = format!(
        "\n        {}__subcmd__{sub})\n",
        bin_name.replace('-', "__")
    );
    let words = r#"            for (( i = 1; i < COMP_CWORD; i++ )); do
                if [[ "${COMP_WORDS[i]}" == "--" ]]; then
                    if declare -F _command_offset >/dev/null; then
                        _command_offset $(( i + 1 ))
                    elif (( COMP_CWORD == i + 1 )); then
                        COMPREPLY=( $(compgen -c -- "${cur}") )
                    else
                        COMPREPLY=( $(compgen -f -- "${cur}") )
                    fi
                    return 0
                fi
            done
"#;
    script
        .replacen(&arm, &format!("{arm}{words}"), 1)
        .into_bytes()
}

/// clap_complete 4.6 spells the bash script's state for a subcommand of a hyphenated binary
/// two ways: the loop that reads the words writes `claude__ide__bridge__subcmd__serve`, the
/// `case` arm that completes the subcommand's options
/// `claude__subcmd__ide__subcmd__bridge__subcmd__serve`, so no option of any subcommand ever
/// completes (clap-rs/clap issue 6421). The arms are respelled the loop's way; once
/// clap_complete writes them so itself this changes nothing. tests/completions.rs completes
/// each subcommand's options through the script in a real bash.
fn fix_bash_case_labels(script: &[u8], bin_name: &str) -> Vec<u8> {
    let script = String::from_utf8_lossy(script);
    let wrong = bin_name.replace('-', "__subcmd__");
    let right = bin_name.replace('-', "__");
    script
        .replace(&format!("{wrong}__subcmd__"), &format!("{right}__subcmd__"))
        .into_bytes()
}

/// One man page for `cmd` and all of its subcommands: the program's own sections (NAME,
/// SYNOPSIS, DESCRIPTION, OPTIONS), then COMMANDS with, for each subcommand, its synopsis,
/// description, options and closing text, as `--help` of that subcommand shows them.
///
/// clap_mangen's own [`Man::render`] gives the top level only, with a subcommand list that
/// points at one page per subcommand (`claude-ide-bridge-serve(1)`), which a single `man`
/// output cannot provide; so the page is put together from its section renderers.
pub fn man_page(mut cmd: Command) -> io::Result<Vec<u8>> {
    cmd.build();
    let mut page = Vec::new();
    let top = Man::new(cmd.clone());
    top.render_title(&mut page)?;
    top.render_name_section(&mut page)?;
    top.render_synopsis_section(&mut page)?;
    top.render_description_section(&mut page)?;
    top.render_options_section(&mut page)?;
    writeln!(page, ".SH COMMANDS")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_bin_name().unwrap_or_else(|| sub.get_name());
        writeln!(page, ".SS \"{name}\"")?;
        let man = Man::new(sub.clone());
        push_body(&mut page, |w| man.render_synopsis_section(w))?;
        writeln!(page, ".PP")?;
        push_body(&mut page, |w| man.render_description_section(w))?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            push_body(&mut page, |w| man.render_options_section(w))?;
        }
        if sub.get_after_long_help().is_some() || sub.get_after_help().is_some() {
            writeln!(page, ".PP")?;
            push_body(&mut page, |w| man.render_extra_section(w))?;
        }
    }
    top.render_version_section(&mut page)?;
    Ok(page)
}

/// Appends what `render` writes for one section, without its heading (the `.SH` lines), so
/// that the section's body sits under a subcommand's own heading. The headings are the only
/// lines a section renderer starts with `.SH`.
fn push_body(
    page: &mut Vec<u8>,
    render: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
) -> io::Result<()> {
    let mut section = Vec::new();
    render(&mut section)?;
    for line in section.split_inclusive(|&b| b == b'\n') {
        if !line.starts_with(b".SH") {
            page.extend_from_slice(line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cli;
    use clap::CommandFactory;

    /// The program and its visible subcommands, each with the long flags of its visible
    /// arguments, read from the clap Command (`""` is the program itself).
    /// (tests/completions.rs checks the program's output against its `--help` text instead.)
    fn commands() -> Vec<(String, Vec<String>)> {
        let mut cmd = Cli::command();
        cmd.build();
        let longs = |c: &Command| -> Vec<String> {
            c.get_arguments()
                .filter(|a| !a.is_hide_set())
                .filter_map(|a| a.get_long().map(str::to_owned))
                .collect()
        };
        let mut all = vec![(String::new(), longs(&cmd))];
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            all.push((sub.get_name().to_owned(), longs(sub)));
        }
        let serve = &all.iter().find(|(n, _)| n == "serve").expect("serve").1;
        assert!(serve.iter().any(|f| f == "on-diff"), "{serve:?}");
        all
    }

    /// `\-\-on\-diff`: how the man page writes `--on-diff` (roff escapes each hyphen).
    fn roff_flag(flag: &str) -> String {
        format!("\\-\\-{}", flag.replace('-', "\\-"))
    }

    #[test]
    fn man_page_has_every_command_and_flag_under_its_command() {
        let page = String::from_utf8(man_page(Cli::command()).unwrap()).unwrap();
        assert!(page.contains(".TH claude-ide-bridge 1"), "{page}");
        for (name, longs) in commands() {
            // The program's own options are under OPTIONS; a subcommand's under its heading.
            let start = if name.is_empty() {
                page.find("\n.SH OPTIONS\n").expect("OPTIONS")
            } else {
                let heading = format!("\n.SS \"claude-ide-bridge {name}\"\n");
                page.find(&heading)
                    .unwrap_or_else(|| panic!("no {heading} in\n{page}"))
            };
            let rest = &page[start + 1..];
            let end = rest[1..].find("\n.S").map_or(rest.len(), |i| i + 1);
            let section = &rest[..end];
            // An option's entry is the line after `.TP` (the synopsis names the flags too).
            let entries: Vec<&str> = section
                .lines()
                .zip(section.lines().skip(1))
                .filter(|(tp, _)| *tp == ".TP")
                .map(|(_, entry)| entry)
                .collect();
            for flag in longs {
                let bold = format!("\\fB{}\\fR", roff_flag(&flag));
                assert!(
                    entries.iter().any(|e| e.contains(&bold)),
                    "{name} --{flag}:\n{section}"
                );
            }
        }
        // No reference to per-subcommand pages that `man` does not install.
        assert!(!page.contains("claude\\-ide\\-bridge\\-serve(1)"), "{page}");
    }

    #[test]
    fn zsh_script_completes_every_flag_of_each_command() {
        let script = String::from_utf8(completions(Cli::command(), CompletionShell::Zsh)).unwrap();
        assert!(
            script.starts_with("#compdef claude-ide-bridge\n"),
            "{script}"
        );
        for (name, longs) in commands() {
            let block = if name.is_empty() {
                &script[..script.find("case $state in").expect("top-level block")]
            } else {
                let start = script
                    .find(&format!("\n({name})\n"))
                    .or(script.find(&format!(" ({name})\n")));
                let start = start.unwrap_or_else(|| panic!("no ({name}) case in\n{script}"));
                let rest = &script[start..];
                &rest[..rest.find(";;").expect("end of case")]
            };
            for flag in longs {
                // `'(--other)--flag[`: a flag that conflicts with another.
                let named = [
                    format!("'--{flag}["),
                    format!("'--{flag}="),
                    format!("'*--{flag}="),
                    format!(")--{flag}["),
                    format!(")--{flag}="),
                ];
                assert!(
                    named.iter().any(|n| block.contains(n.as_str())),
                    "{name} --{flag}:\n{block}"
                );
            }
            if !name.is_empty() {
                assert!(
                    script.contains(&format!("'{name}:")),
                    "{name} is not offered"
                );
            }
        }
    }

    /// The PowerShell script registers a native completer for the program, offers every command
    /// at the top and, in each command's arm, every flag `--help` lists. (No PowerShell runs
    /// here: the structure is what is checked.)
    #[test]
    fn powershell_script_completes_every_flag_of_each_command() {
        let script =
            String::from_utf8(completions(Cli::command(), CompletionShell::Powershell)).unwrap();
        assert!(
            script.contains("Register-ArgumentCompleter -Native -CommandName 'claude-ide-bridge'"),
            "{script}"
        );
        let arm = |key: &str| -> &str {
            let head = format!("'{key}' {{");
            let start = script
                .find(&head)
                .unwrap_or_else(|| panic!("no {head} arm in\n{script}"));
            let rest = &script[start..];
            &rest[..rest.find("\n            break\n").expect("end of arm")]
        };
        for (name, longs) in commands() {
            let block = if name.is_empty() {
                arm("claude-ide-bridge")
            } else {
                arm(&format!("claude-ide-bridge;{name}"))
            };
            for flag in longs {
                let offered = format!("[CompletionResult]::new('--{flag}'");
                assert!(block.contains(&offered), "{name} --{flag}:\n{block}");
            }
            if !name.is_empty() {
                let offered = format!("[CompletionResult]::new('{name}'");
                assert!(
                    arm("claude-ide-bridge").contains(&offered),
                    "{name} is not offered"
                );
            }
        }
    }
}
