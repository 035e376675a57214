//===- LoaderTest.cpp - artifact loading corner cases --------------------===//
//
// Programs built here, sealed and loaded as an artifact directory: a splat
// constant (one element stored, repeated by the loader), a parameter read
// through a view of another shape, and the corrupt ones the loader must
// refuse before it allocates anything.
//
//===----------------------------------------------------------------------===//
#include "mp/Program/program.pb.h"
#include "mp/Runtime/Executable.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace mp::rt;

namespace {

/// An artifact directory holding `prog`, removed when the test ends.
struct ProgramDir {
  explicit ProgramDir(const mp::program::Program &prog)
      : path(::testing::TempDir() + "/" + std::to_string(getpid()) +
             "_loader") {
    std::filesystem::create_directories(path);
    std::ofstream(path + "/program.pb", std::ios::binary)
        << sealProgram(prog.SerializeAsString());
  }
  ~ProgramDir() { std::filesystem::remove_all(path); }
  const std::string path;
};

/// A program returning one f32 constant of `shape`, stored as `stored`
/// (one element for a splat).
mp::program::Program constantProgram(std::vector<int64_t> shape,
                                     const std::string &stored, bool splat) {
  mp::program::Program prog;
  prog.set_version(kProgramVersion);
  mp::program::Buffer *b = prog.add_buffers();
  b->set_kind(mp::program::Buffer::CONSTANT);
  b->set_dtype("f32");
  for (int64_t d : shape)
    b->add_shape(d);
  b->set_data(stored);
  b->set_splat(splat);
  mp::program::Binding *out = prog.add_outputs();
  out->set_name("y");
  out->set_buffer(0);
  prog.set_synthetic_weights(true);
  return prog;
}

std::string floatBytes(float v) {
  std::string bytes(sizeof v, '\0');
  std::memcpy(bytes.data(), &v, sizeof v);
  return bytes;
}

/// Loads `prog` (no inputs, one output) into `exe` and runs it once.
void loadAndRun(const mp::program::Program &prog,
                std::unique_ptr<Executable> &exe,
                std::vector<Tensor> &outputs) {
  ProgramDir dir(prog);
  Status s = Executable::load(dir.path, exe);
  ASSERT_TRUE(s) << s.message;
  s = exe->run({}, outputs);
  ASSERT_TRUE(s) << s.message;
  ASSERT_EQ(outputs.size(), 1u);
}

TEST(Loader, RepeatsASplatConstant) {
  std::unique_ptr<Executable> exe;
  std::vector<Tensor> outputs;
  ASSERT_NO_FATAL_FAILURE(loadAndRun(
      constantProgram({3, 5}, floatBytes(2.5f), true), exe, outputs));
  const Tensor &t = outputs[0];
  ASSERT_EQ(t.numel(), 15);
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_EQ(t.as<float>()[i], 2.5f);
}

/// Loading `prog` fails with an error containing `expected`.
void expectRefused(const mp::program::Program &prog,
                   const std::string &expected) {
  ProgramDir dir(prog);
  std::unique_ptr<Executable> exe;
  Status s = Executable::load(dir.path, exe);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find(expected), std::string::npos) << s.message;
}

TEST(Loader, RefusesASplatOfTheWrongSize) {
  expectRefused(constantProgram({3, 5}, floatBytes(1) + floatBytes(2), true),
                "holds 8 bytes for each element of");
}

TEST(Loader, RefusesAHugeSplatBeforeAllocatingIt) {
  // 2^40 floats: larger than every parameter (none) and the arena (none).
  expectRefused(constantProgram({int64_t(1) << 20, int64_t(1) << 20},
                                floatBytes(0), true),
                "larger than every parameter and the arena");
}

/// A program returning parameter `w` [2, 3, 4] (synthetic values) read
/// through a buffer of shape `viewed`: a view of its bytes, as the
/// compiler writes an einsum's weight viewed 2-D by its linear.
mp::program::Program parameterViewProgram(std::vector<int64_t> viewed) {
  mp::program::Program prog;
  prog.set_version(kProgramVersion);
  prog.set_synthetic_weights(true);
  mp::program::Parameter *w = prog.add_parameters();
  w->set_name("w");
  w->set_dtype("f32");
  for (int64_t d : {2, 3, 4})
    w->add_shape(d);
  mp::program::Buffer *view = prog.add_buffers();
  view->set_kind(mp::program::Buffer::PARAMETER);
  view->set_dtype("f32");
  for (int64_t d : viewed)
    view->add_shape(d);
  view->set_parameter(0);
  mp::program::Binding *out = prog.add_outputs();
  out->set_name("y");
  out->set_buffer(0);
  return prog;
}

TEST(Loader, ReadsAParameterThroughAViewOfItsBytes) {
  std::unique_ptr<Executable> exe;
  std::vector<Tensor> outputs;
  ASSERT_NO_FATAL_FAILURE(
      loadAndRun(parameterViewProgram({2, 12}), exe, outputs));
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{2, 12}));
  ASSERT_EQ(exe->parameters().size(), 1u);
  EXPECT_EQ(outputs[0].data, exe->parameters()[0].tensor.data);
}

TEST(Loader, RefusesAParameterViewOfAnotherSize) {
  expectRefused(parameterViewProgram({2, 13}), "does not match parameter 0");
}

} // namespace
