// `iris shard` (and `iris convert --tp`): one archive per tensor- and expert-parallel rank,
// cut from a whole archive by the family's split rules (converter/shard/shard_rules.h), each
// tensor's box losslessly (converter/shard/tensor_slice.h), each rank's manifest recording the
// logical tensors and its box of each (FORMAT.md section 11).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/status.h"
#include "converter/shard/shard_rules.h"

namespace iris {

struct ShardOptions {
  std::string archive;  // a whole archive, or an archive set's index
  std::string output;   // the folder the rank archives go to (made if missing)
  ShardSpec spec;
  bool overwrite = false;
  bool direct_io = true;
  std::function<void(uint64_t, uint64_t)> progress;
  PartialFileRegistry* partial_files = nullptr;
};

struct ShardReport {
  uint32_t ranks = 0;
  uint64_t logical_tensors = 0, split_tensors = 0, replicated_tensors = 0;
  std::vector<std::string> unruled;  // matrices replicated because no rule names them
  std::vector<std::pair<std::string, uint64_t>> files;  // each rank's archive and its size
  double seconds = 0;
  nlohmann::json to_json() const;
};

// The most ranks one shard writes (each rank's file is held open until all are complete).
constexpr uint32_t kMaxShardRanks = 512;

// "rank-00001-of-00004.iris": rank 1 (0-based) of a world of 4.
std::string rank_file_name(uint32_t rank, uint32_t world);

// Nothing is written unless every rank's archive is complete: all are named at the end. A
// rank file that exists is refused unless overwriting.
Result<ShardReport> run_shard(const ShardOptions& o);

}  // namespace iris
