#include "converter/cli/shell_docs.h"

#include <CLI/CLI.hpp>

#include <sstream>

namespace iris {

namespace {

std::string option_names(const CLI::App& app) {
  std::string out;
  for (const auto* o : app.get_options()) {
    for (const auto& n : o->get_lnames()) out += (out.empty() ? "--" : " --") + n;
    for (const auto& n : o->get_snames()) out += (out.empty() ? "-" : " -") + n;
  }
  return out;
}

// roff: a leading '.' or '\'' starts a request, and '\' escapes.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
    line_start = c == '\n';
  }
  return out;
}

}  // namespace

std::string bash_completion(const CLI::App& app) {
  std::ostringstream s;
  std::string commands;
  for (const auto* sub : app.get_subcommands({})) commands += (commands.empty() ? "" : " ") + sub->get_name();
  s << "# bash completion for iris (iris completion bash), made from iris's own options\n"
    << "_iris() {\n"
    << "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"\" i\n"
    << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
    << "    case \"${COMP_WORDS[i]}\" in " << [&] {
         std::string alt;
         for (const auto* sub : app.get_subcommands({})) alt += (alt.empty() ? "" : "|") + sub->get_name();
         return alt;
       }() << ") cmd=\"${COMP_WORDS[i]}\"; break ;; esac\n"
    << "  done\n"
    << "  local opts\n"
    << "  case \"$cmd\" in\n"
    << "    \"\") COMPREPLY=($(compgen -W \"" << commands << " help version " << option_names(app) << "\" -- \"$cur\")); return ;;\n";
  for (const auto* sub : app.get_subcommands({}))
    s << "    " << sub->get_name() << ") opts=\"" << option_names(*sub) << " " << option_names(app) << "\" ;;\n";
  s << "  esac\n"
    << "  if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")); else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n"
    << "}\n"
    << "complete -o filenames -o bashdefault -F _iris iris\n";
  return s.str();
}

std::string zsh_completion(const CLI::App& app) {
  return "# zsh completion for iris (iris completion zsh): the bash script through bashcompinit\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         bash_completion(app);
}

std::string man_page(const CLI::App& app, const std::string& version, const std::string& exit_codes) {
  std::ostringstream s;
  std::string description = app.get_description();
  if (description.rfind("iris: ", 0) == 0) description = description.substr(6);
  s << ".TH IRIS 1 \"\" \"iris " << roff(version) << "\" \"User Commands\"\n"
    << ".SH NAME\niris \\- " << roff(description) << "\n"
    << ".SH SYNOPSIS\n.B iris\n.I COMMAND\n[\\fIOPTIONS\\fR]\n"
    << ".SH DESCRIPTION\nEach command's options follow; \\fBiris help\\fR \\fICOMMAND\\fR prints the same.\n";
  auto options = [&](const CLI::App& a) {
    for (const auto* o : a.get_options()) {
      if (o->get_lnames().empty() && o->get_snames().empty() && o->get_name().empty()) continue;
      s << ".TP\n.B " << roff(o->get_name(false, true)) << "\n" << roff(o->get_description().empty() ? " " : o->get_description()) << "\n";
    }
  };
  s << ".SH GLOBAL OPTIONS\n";
  options(app);
  s << ".SH COMMANDS\n";
  for (const auto* sub : app.get_subcommands({})) {
    s << ".SS " << sub->get_name() << "\n" << roff(sub->get_description()) << "\n";
    options(*sub);
    if (!sub->get_footer().empty()) s << ".PP\n.nf\n" << roff(sub->get_footer()) << "\n.fi\n";
  }
  s << ".SH EXIT STATUS\n.nf\n" << roff(exit_codes) << "\n.fi\n"
    << ".SH SEE ALSO\nThe README and docs/ of the iris source tree; formats/FORMAT.md for the archive format.\n";
  return s.str();
}

}  // namespace iris
