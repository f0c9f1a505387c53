// A tiny self-contained safetensors reader for the quant tests (FORMATS.md 1.1, 1.5), so
// they depend on nothing but quant/: the whole file is read into memory (fixtures are a few
// MB), the header parsed with nlohmann::json. Not a validator: malformed files fail loudly.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/float_bits.h"
#include "tests/test_paths.h"

namespace iris::quant::test {

inline const std::string kFixtures = iris::test_paths::fixtures();

struct StTensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;

  uint64_t numel() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }
  template <typename T>
  std::vector<T> as() const {  // a copy, so alignment never matters
    std::vector<T> v(bytes / sizeof(T));
    if (bytes) std::memcpy(v.data(), data, bytes);
    return v;
  }
  // F32, BF16 and F16 widened to FP32 (exact).
  std::vector<float> as_f32() const {
    std::vector<float> out(numel());
    for (uint64_t i = 0; i < out.size(); ++i) {
      if (dtype == "F32") std::memcpy(&out[i], data + 4 * i, 4);
      else {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
      }
    }
    return out;
  }
};

class StFile {
 public:
  explicit StFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    bytes_.assign(s.begin(), s.end());
    if (bytes_.size() < 8) throw std::runtime_error(path + ": shorter than 8 bytes");
    uint64_t header_len;
    std::memcpy(&header_len, bytes_.data(), 8);  // little-endian host
    if (8 + header_len > bytes_.size()) throw std::runtime_error(path + ": header length past the end");
    const auto header = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + long(header_len));
    const uint8_t* data = bytes_.data() + 8 + header_len;
    for (const auto& [name, v] : header.items()) {
      if (name == "__metadata__") continue;
      StTensor t;
      t.name = name;
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<uint64_t>>();
      const auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[1] < off[0] || 8 + header_len + off[1] > bytes_.size())
        throw std::runtime_error(path + ": bad data_offsets for " + name);
      t.data = data + off[0];
      t.bytes = off[1] - off[0];
      tensors_[name] = t;
    }
  }
  StFile(const StFile&) = delete;
  StFile& operator=(const StFile&) = delete;

  const StTensor* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const StTensor& at(const std::string& name) const {
    const StTensor* t = find(name);
    if (!t) throw std::runtime_error("no tensor " + name);
    return *t;
  }
  const std::map<std::string, StTensor>& tensors() const { return tensors_; }

 private:
  std::vector<uint8_t> bytes_;
  std::map<std::string, StTensor> tensors_;
};

// An HF snapshot folder: model.safetensors, or shards resolved through the index's weight_map.
class StSnapshot {
 public:
  explicit StSnapshot(const std::string& dir) {
    std::ifstream idx(dir + "/model.safetensors.index.json");
    if (!idx) {
      files_.push_back(std::make_unique<StFile>(dir + "/model.safetensors"));
      return;
    }
    const auto index = nlohmann::json::parse(idx);
    std::map<std::string, size_t> shard_of_file;
    for (const auto& [name, file] : index.at("weight_map").items()) {
      const std::string f = file.get<std::string>();
      if (!shard_of_file.count(f)) {
        shard_of_file[f] = files_.size();
        files_.push_back(std::make_unique<StFile>(dir + "/" + f));
      }
    }
  }
  const StTensor& at(const std::string& name) const {
    for (const auto& f : files_)
      if (const StTensor* t = f->find(name)) return *t;
    throw std::runtime_error("no tensor " + name);
  }
  std::vector<const StTensor*> all() const {
    std::vector<const StTensor*> out;
    for (const auto& f : files_)
      for (const auto& [name, t] : f->tensors()) out.push_back(&t);
    return out;
  }

 private:
  std::vector<std::unique_ptr<StFile>> files_;
};

}  // namespace iris::quant::test
