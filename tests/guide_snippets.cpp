// Every code block of the user guide is the code it names, in a file that is compiled and run
// (an example or a test): a block follows a line
//   <!-- snippet: examples/three_devices.cpp from "pipeline p(rt" to "p.run();" -->
// and must equal the lines of that file from the first line containing the first text through
// the next line containing the second, indentation removed. A guide without snippets fails too.
//   guide_snippets ROOT docs/guide.md
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  return lines;
}

// The region's lines with their common indentation removed; empty when not found.
std::vector<std::string> region(const std::vector<std::string>& file, const std::string& from, const std::string& to) {
  const auto first =
      std::find_if(file.begin(), file.end(), [&](const std::string& l) { return l.find(from) != l.npos; });
  if (first == file.end()) return {};
  const auto last = std::find_if(first, file.end(), [&](const std::string& l) { return l.find(to) != l.npos; });
  if (last == file.end()) return {};
  std::vector<std::string> out(first, last + 1);
  std::size_t indent = std::string::npos;
  for (const auto& l : out)
    if (l.find_first_not_of(' ') != std::string::npos) indent = std::min(indent, l.find_first_not_of(' '));
  for (auto& l : out)
    l = l.size() > indent ? l.substr(indent) : std::string();
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string t;
  for (const auto& l : lines)
    t += "    | " + l + "\n";
  return t;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ROOT GUIDE.md\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1], guide = argv[2];
  const auto doc = lines_of(root + "/" + guide);
  const std::regex marker(R"re(<!-- snippet: (\S+) from "(.*)" to "(.*)" -->)re");
  int checked = 0, wrong = 0;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(doc[i], m, marker)) continue;
    const std::string where = guide + ":" + std::to_string(i + 1);
    if (i + 1 >= doc.size() || doc[i + 1].rfind("```", 0) != 0) {
      std::fprintf(stderr, "%s: a snippet marker without a code block after it\n", where.c_str());
      ++wrong;
      continue;
    }
    std::vector<std::string> block;
    std::size_t j = i + 2;
    for (; j < doc.size() && doc[j].rfind("```", 0) != 0; ++j)
      block.push_back(doc[j]);
    const auto source = lines_of(root + "/" + m[1].str());
    if (source.empty()) {
      std::fprintf(stderr, "%s: %s cannot be read\n", where.c_str(), m[1].str().c_str());
      ++wrong;
      continue;
    }
    const auto expected = region(source, m[2].str(), m[3].str());
    if (expected.empty()) {
      std::fprintf(stderr, "%s: no region from \"%s\" to \"%s\" in %s\n", where.c_str(), m[2].str().c_str(),
                   m[3].str().c_str(), m[1].str().c_str());
      ++wrong;
    } else if (expected != block) {
      std::fprintf(stderr, "%s: the block differs from %s; the guide has\n%sthe source has\n%s", where.c_str(),
                   m[1].str().c_str(), joined(block).c_str(), joined(expected).c_str());
      ++wrong;
    }
    ++checked;
    i = j;
  }
  if (checked == 0) {
    std::fprintf(stderr, "%s: no snippet markers found\n", guide.c_str());
    return 1;
  }
  std::printf("%s: %d snippets checked, %d differ\n", guide.c_str(), checked, wrong);
  return wrong == 0 ? 0 : 1;
}
