//===- Safetensors.cpp - safetensors files --------------------------------===//
#include "mp/Runtime/Safetensors.h"

#include "cpu/HugePages.h"
#include "mp/Runtime/Npy.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <zlib.h>

namespace mp::rt {

static const struct {
  const char *name;
  DType dtype;
} kNames[] = {{"F32", DType::F32},   {"F64", DType::F64},  {"F16", DType::F16},
              {"BF16", DType::BF16}, {"I64", DType::I64},  {"I32", DType::I32},
              {"I8", DType::I8},     {"BOOL", DType::Bool}};

const char *safetensorsDTypeName(DType type) {
  for (const auto &n : kNames)
    if (n.dtype == type)
      return n.name;
  return "?";
}

void SafetensorsWriter::add(const std::string &name, DType dtype,
                            std::vector<int64_t> shape, std::string bytes) {
  uint64_t begin = 0;
  if (!entries.empty())
    begin = entries.back().second.end;
  entries.push_back(
      {name, {dtype, std::move(shape), begin, begin + bytes.size()}});
  data.push_back(std::move(bytes));
}

uint32_t checksumOf(const void *data, uint64_t bytes) {
  uint32_t crc = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  const auto *p = static_cast<const Bytef *>(data);
  for (uint64_t off = 0; off < bytes; off += 1u << 30)
    crc = static_cast<uint32_t>(
        crc32(crc, p + off,
              static_cast<uInt>(std::min<uint64_t>(bytes - off, 1u << 30))));
  return crc;
}

Status SafetensorsWriter::finish() {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"producer", "mp"}};
  if (checksums)
    for (size_t i = 0; i < entries.size(); ++i)
      header["__metadata__"]["crc32:" + entries[i].first] =
          std::to_string(checksumOf(data[i].data(), data[i].size()));
  for (const auto &[name, e] : entries)
    header[name] = {{"dtype", safetensorsDTypeName(e.dtype)},
                    {"shape", e.shape},
                    {"data_offsets", {e.begin, e.end}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t len = text.size();
  std::vector<std::string_view> pieces = {
      std::string_view(reinterpret_cast<const char *>(&len), 8), text};
  for (const std::string &d : data)
    pieces.push_back(d);
  return writeFileAtomically(path, pieces);
}

Status SafetensorsFile::open(const std::string &path,
                             std::unique_ptr<SafetensorsFile> &out) {
  if (Status s = expectRegularFile(path); !s)
    return s;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open parameter file '" + path + "'");
  in.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint64_t headerLen = 0;
  if (size < 8 || !in.read(reinterpret_cast<char *>(&headerLen), 8) ||
      headerLen > size - 8)
    return Status::error("parameter file '" + path +
                         "' is truncated or not a safetensors file");
  std::string text(headerLen, '\0');
  in.read(text.data(), static_cast<std::streamsize>(headerLen));
  uint64_t dataSize = size - 8 - headerLen;

  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  std::map<std::string, std::string> checksums; // tensor -> its crc32
  try {
    nlohmann::json header = nlohmann::json::parse(text);
    for (auto &[name, value] : header.items()) {
      if (name == "__metadata__") {
        for (auto &[key, crc] : value.items())
          if (key.rfind("crc32:", 0) == 0)
            checksums[key.substr(6)] = crc.get<std::string>();
        continue;
      }
      SafetensorsEntry e;
      std::string dtype = value.at("dtype").get<std::string>();
      bool known = false;
      for (const auto &n : kNames)
        if (dtype == n.name) {
          e.dtype = n.dtype;
          known = true;
        }
      if (!known)
        return Status::error("parameter file '" + path + "': tensor '" + name +
                             "' has unsupported dtype " + dtype);
      e.shape = value.at("shape").get<std::vector<int64_t>>();
      auto offsets = value.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] ||
          offsets[1] > dataSize)
        return Status::error("parameter file '" + path + "': tensor '" + name +
                             "' lies outside the file (truncated?)");
      e.begin = offsets[0];
      e.end = offsets[1];
      if (e.end - e.begin != Tensor{nullptr, e.dtype, e.shape}.bytes())
        return Status::error("parameter file '" + path + "': tensor '" + name +
                             "' has " + std::to_string(e.end - e.begin) +
                             " bytes for shape " + formatShape(e.shape));
      file->table[name] = e;
    }
  } catch (const std::exception &ex) {
    return Status::error("parameter file '" + path +
                         "' has a corrupt header: " + ex.what());
  }
  void *mem = cpu::allocateHugeAligned(dataSize);
  if (!mem)
    return Status::error("out of memory reading '" + path + "'");
  file->storage = std::unique_ptr<uint8_t, void (*)(void *)>(
      static_cast<uint8_t *>(mem), std::free);
  if (!in.read(reinterpret_cast<char *>(mem),
               static_cast<std::streamsize>(dataSize)))
    return Status::error("cannot read the data of '" + path + "'");
  for (const auto &[name, crc] : checksums) {
    auto entry = file->table.find(name);
    if (entry == file->table.end() ||
        std::to_string(checksumOf(file->data(entry->second),
                                  entry->second.end - entry->second.begin)) !=
            crc)
      return Status::error("parameter file '" + path + "': tensor '" + name +
                           "' fails its checksum (corrupt file)");
  }
  out = std::move(file);
  return Status::success();
}

} // namespace mp::rt
