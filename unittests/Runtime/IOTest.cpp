//===- IOTest.cpp - .npy and safetensors files ----------------------------===//
#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace mp::rt;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

/// A file name in the test's temporary directory, removed when the test
/// ends (each run would otherwise leave its files behind).
struct TempFile {
  explicit TempFile(const std::string &name) : path(tempPath(name)) {}
  ~TempFile() { std::remove(path.c_str()); }
  TempFile(const TempFile &) = delete;
  TempFile &operator=(const TempFile &) = delete;
  operator const std::string &() const { return path; }
  const std::string path;
};

TEST(Npy, RoundTripsEveryDType) {
  for (DType dtype : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8,
                      DType::Bool, DType::F16}) {
    HostBuffer in;
    in.dtype = dtype;
    in.shape = {2, 3};
    in.bytes.resize(6 * dtypeSize(dtype));
    for (size_t i = 0; i < in.bytes.size(); ++i)
      in.bytes[i] = static_cast<uint8_t>(dtype == DType::Bool ? i % 2 : i * 7);
    TempFile path("rt.npy");
    ASSERT_TRUE(writeNpy(path, in.view())) << dtypeName(dtype);
    HostBuffer out;
    Status s = readNpy(path, out);
    ASSERT_TRUE(s) << s.message;
    EXPECT_EQ(out.dtype, dtype);
    EXPECT_EQ(out.shape, in.shape);
    EXPECT_EQ(out.bytes, in.bytes);
  }
}

TEST(Npy, ScalarAndVectorShapes) {
  float x = 3.5f;
  TempFile path("scalar.npy");
  ASSERT_TRUE(writeNpy(path, Tensor{&x, DType::F32, {}}));
  HostBuffer out;
  ASSERT_TRUE(readNpy(path, out));
  EXPECT_TRUE(out.shape.empty());
  EXPECT_EQ(*reinterpret_cast<float *>(out.bytes.data()), 3.5f);
  ASSERT_TRUE(writeNpy(path, Tensor{&x, DType::F32, {1}}));
  ASSERT_TRUE(readNpy(path, out));
  EXPECT_EQ(out.shape, (std::vector<int64_t>{1}));
}

TEST(Npy, ErrorsNameTheFile) {
  HostBuffer out;
  Status s = readNpy(tempPath("absent.npy"), out);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find("cannot open"), std::string::npos);
  TempFile path("garbage.npy");
  std::ofstream(path) << "not numpy";
  s = readNpy(path, out);
  EXPECT_NE(s.message.find("is not a .npy file"), std::string::npos);
  // Truncated data: a valid header for 2x3 f32 with 4 bytes of data.
  float data[6] = {0};
  ASSERT_TRUE(writeNpy(path, Tensor{data, DType::F32, {2, 3}}));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 20);
  s = readNpy(path, out);
  EXPECT_NE(s.message.find("holds 4 bytes of data but its shape 2x3 needs 24"),
            std::string::npos)
      << s.message;
  s = readNpy("/dev/zero", out);
  EXPECT_NE(s.message.find("is not a regular file"), std::string::npos)
      << s.message;
}

/// A version-1 .npy file with header dict `dict` and `data` bytes of data.
static std::string npyFile(const std::string &dict, size_t data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 16)
    header += ' ';
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  return file + header + std::string(data, '\0');
}

/// uint8 reads as a boolean mask: 0 and 1 only.
TEST(Npy, Uint8IsABooleanMask) {
  auto decode = [](char value) {
    std::string file =
        npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", 4);
    file[file.size() - 2] = value;
    HostBuffer out;
    Status s = decodeNpy(file, "m.npy", out);
    return s ? std::string(dtypeName(out.dtype)) : s.message;
  };
  EXPECT_EQ(decode(1), "bool");
  EXPECT_NE(decode(7).find("holds uint8 values other than 0 and 1"),
            std::string::npos)
      << decode(7);
}

TEST(Npy, HostileHeadersAreErrors) {
  auto decode = [](const std::string &shape, size_t data = 128) {
    HostBuffer out;
    Status s = decodeNpy(npyFile("{'descr': '<i8', 'fortran_order': False, "
                                 "'shape': " +
                                     shape + ", }",
                                 data),
                         "x.npy", out);
    return s ? std::string("ok") : s.message;
  };
  EXPECT_EQ(decode("(2, 8)"), "ok");
  EXPECT_EQ(decode("(16,)"), "ok");
  EXPECT_EQ(decode("()", 8), "ok");
  EXPECT_NE(
      decode("(-1, 8)").find("shape dimension '-1' that is not a non-negative"),
      std::string::npos);
  EXPECT_NE(decode("(1125899906842624, 8)").find("more than"),
            std::string::npos);
  EXPECT_NE(decode("(99999999999999999999, 8)").find("not a non-negative"),
            std::string::npos);
  EXPECT_NE(decode("[2, 8]").find("not a tuple"), std::string::npos);
  EXPECT_NE(decode("(2, x)").find("dimension 'x'"), std::string::npos);
  EXPECT_NE(decode("(2, 8)", 200).find("holds 200 bytes of data"),
            std::string::npos);
  HostBuffer out;
  std::string file = npyFile("{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (2,), }",
                             8);
  file[6] = 9;
  EXPECT_NE(decodeNpy(file, "x.npy", out).message.find("version 9"),
            std::string::npos);
  file[6] = 1;
  EXPECT_NE(decodeNpy(file.substr(0, 20), "x.npy", out)
                .message.find("truncated header"),
            std::string::npos);
}

TEST(Safetensors, RoundTripAndCorruption) {
  TempFile path("p.safetensors");
  SafetensorsWriter writer(path);
  std::string a(4 * 6, '\x01'), b(8 * 2, '\x02');
  writer.add("a.weight", DType::F32, {2, 3}, a);
  writer.add("b", DType::I64, {2}, b);
  ASSERT_TRUE(writer.finish());
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::open(path, file);
  ASSERT_TRUE(s) << s.message;
  ASSERT_EQ(file->entries().size(), 2u);
  const SafetensorsEntry &e = file->entries().at("b");
  EXPECT_EQ(e.dtype, DType::I64);
  EXPECT_EQ(e.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(file->data(e)), 16), b);

  // Truncate the data section: the last tensor no longer fits.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  s = SafetensorsFile::open(path, file);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find("tensor 'b' lies outside the file"),
            std::string::npos)
      << s.message;

  // A header length beyond the file.
  std::ofstream(path, std::ios::binary)
      << std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8);
  s = SafetensorsFile::open(path, file);
  EXPECT_NE(s.message.find("truncated or not a safetensors file"),
            std::string::npos);
}

} // namespace
