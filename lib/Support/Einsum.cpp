//===- Einsum.cpp - einsum equation parsing -------------------------------===//
#include "mp/Support/Einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace mp {

static std::string removeSpaces(const std::string &s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c)))
      out += c;
  return out;
}

static std::vector<std::string> splitTerms(const std::string &s) {
  std::vector<std::string> terms(1);
  for (char c : s) {
    if (c == ',')
      terms.emplace_back();
    else
      terms.back() += c;
  }
  return terms;
}

/// Expands "..." in `term` into `numDims` ellipsis labels, right-aligned
/// against `maxDims` so that broadcasting lines up across inputs.
static bool expandEllipsis(std::string &term, int64_t numDims, int64_t maxDims,
                           std::string &error) {
  size_t pos = term.find("...");
  if (pos == std::string::npos)
    return true;
  if (term.find("...", pos + 3) != std::string::npos) {
    error = "more than one ellipsis in term '" + term + "'";
    return false;
  }
  std::string labels;
  for (int64_t i = maxDims - numDims; i < maxDims; ++i)
    labels += static_cast<char>('0' + i);
  term = term.substr(0, pos) + labels + term.substr(pos + 3);
  return true;
}

static int64_t countLetters(const std::string &term) {
  return std::count_if(term.begin(), term.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c));
  });
}

bool parseEinsum(const std::string &equation, const std::vector<int64_t> &ranks,
                 EinsumSpec &spec, std::string &error) {
  std::string eq = removeSpaces(equation);
  size_t arrow = eq.find("->");
  std::string lhs = arrow == std::string::npos ? eq : eq.substr(0, arrow);
  bool explicitOutput = arrow != std::string::npos;
  std::string rhs = explicitOutput ? eq.substr(arrow + 2) : "";

  std::vector<std::string> terms = splitTerms(lhs);
  if (terms.size() != ranks.size()) {
    error = "equation '" + equation + "' has " + std::to_string(terms.size()) +
            " input terms but " + std::to_string(ranks.size()) +
            " operands were given";
    return false;
  }
  for (const std::string &t : terms)
    for (char c : t)
      if (!std::isalpha(static_cast<unsigned char>(c)) && c != '.') {
        error = "invalid character '" + std::string(1, c) + "' in equation";
        return false;
      }

  // Number of dimensions each ellipsis covers.
  int64_t maxEllipsis = 0;
  std::vector<int64_t> ellipsisDims(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = countLetters(terms[i]);
    bool hasEllipsis = terms[i].find("...") != std::string::npos;
    if ((!hasEllipsis && letters != ranks[i]) || letters > ranks[i]) {
      error = "term '" + terms[i] + "' does not match operand " +
              std::to_string(i) + " of rank " + std::to_string(ranks[i]);
      return false;
    }
    ellipsisDims[i] = hasEllipsis ? ranks[i] - letters : 0;
    maxEllipsis = std::max(maxEllipsis, ellipsisDims[i]);
  }
  if (maxEllipsis > 10) {
    error = "ellipsis covers more than 10 dimensions";
    return false;
  }
  for (size_t i = 0; i < terms.size(); ++i)
    if (!expandEllipsis(terms[i], ellipsisDims[i], maxEllipsis, error))
      return false;

  if (explicitOutput) {
    if (!expandEllipsis(rhs, maxEllipsis, maxEllipsis, error))
      return false;
    for (char c : rhs) {
      bool known = std::any_of(terms.begin(), terms.end(), [&](auto &t) {
        return t.find(c) != std::string::npos;
      });
      if (!known) {
        error = "output label '" + std::string(1, c) +
                "' does not appear in any input";
        return false;
      }
    }
  } else {
    // Implicit output: ellipsis dims, then labels seen once, alphabetically.
    std::map<char, int> counts;
    for (const std::string &t : terms)
      for (char c : t)
        ++counts[c];
    for (int64_t i = 0; i < maxEllipsis; ++i)
      rhs += static_cast<char>('0' + i);
    for (auto &[c, n] : counts)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c)))
        rhs += c;
  }
  spec.inputs = terms;
  spec.output = rhs;
  return true;
}

bool inferEinsumShape(const EinsumSpec &spec,
                      const std::vector<std::vector<int64_t>> &shapes,
                      std::vector<int64_t> &outputShape, std::string &error,
                      std::map<char, int64_t> *labelSizes) {
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::string &term = spec.inputs[i];
    if (term.size() != shapes[i].size()) {
      error = "operand " + std::to_string(i) + " has rank " +
              std::to_string(shapes[i].size()) + " but its term has " +
              std::to_string(term.size()) + " labels";
      return false;
    }
    for (size_t d = 0; d < term.size(); ++d) {
      char c = term[d];
      int64_t size = shapes[i][d];
      auto it = sizes.find(c);
      if (it == sizes.end()) {
        sizes[c] = size;
        continue;
      }
      bool ellipsis = std::isdigit(static_cast<unsigned char>(c));
      if (it->second == size)
        continue;
      if (ellipsis && (it->second == 1 || size == 1)) {
        it->second = std::max(it->second, size);
        continue;
      }
      error = "label '" + std::string(1, c) + "' has size " +
              std::to_string(it->second) + " and " + std::to_string(size);
      return false;
    }
  }
  outputShape.clear();
  for (char c : spec.output)
    outputShape.push_back(sizes[c]);
  if (labelSizes)
    *labelSizes = std::move(sizes);
  return true;
}

} // namespace mp
