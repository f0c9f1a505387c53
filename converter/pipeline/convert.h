// The conversion pipeline: snapshot -> logical tensors -> layout -> archive.
#pragma once

#include <functional>
#include <optional>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "converter/sources/packed_integers.h"
#include "common/atomic_output.h"
#include "common/status.h"
#include "formats/iris_writer.h"
#include "converter/pipeline/parts.h"
#include "converter/shard/shard.h"
#include "converter/pipeline/quality.h"
#include "formats/tensor_desc.h"

namespace iris {

struct ConvertOptions {
  std::string source;
  std::string config;  // --config: the config of a .iris v1 source (a config.json or a snapshot folder)
  std::string output;
  bool overwrite = false;
  uint64_t tile_n = kDefaultTileN;
  uint64_t tile_k = kDefaultTileK;
  // Called with (bytes done, bytes total) while the archive is written; the CLI draws its bar.
  std::function<void(uint64_t, uint64_t)> progress;
  PartialFileRegistry* partial_files = nullptr;  // the CLI's signal cleanup of the partial archive
  // --quant and friends
  std::string quant = "keep";
  std::vector<std::string> rules;   // REGEX=FORMAT
  std::vector<std::string> skips;   // REGEX
  bool allow_unmatched = false;
  bool allow_nonfinite = false;
  bool allow_unscaled_fp8 = false;  // keep FP8 tensors without a scale raw (their values are the weights)
  PackedIntegerAllowances allow_packed;  // GPTQ / AWQ / compressed-tensors findings accepted
  bool dry_run = false;
  std::string mxfp4_scale = "ocp";  // ocp | search
  std::string report_path;          // --report FILE.json
  uint64_t max_rss = 0;             // bytes; 0: no budget. Smaller chunks are chosen to fit, or the run is refused up front
  bool direct_io = true;            // the archive's data by direct I/O where the filesystem allows (WriteOptions::direct_io)
  // --max-file-size: write an archive set (FORMAT.md section 10): `output` is its index, the
  // tensors go to members of at most this many bytes each. 0: one file.
  uint64_t max_file_size = 0;
  // --tp N [--ep M]: `output` is a folder of one archive per rank (converter/shard/shard.h),
  // cut from the whole conversion, which is written to a temporary file in that folder first.
  uint32_t tp = 1, ep = 1;
  // --part i/n: only that part's tensors, in an archive that `iris merge` joins with the
  // others into the archive this conversion writes whole (converter/pipeline/parts.h).
  PartSpec part;
  // --resume: the conversion is written as segments committed one by one in OUTPUT.resume/
  // (each a part of at most about resume_every output bytes, or one tensor), then merged; a
  // run started again with the same source and options converts only the segments missing
  // (converter/pipeline/resume.h).
  bool resume = false;
  uint64_t resume_every = uint64_t(1) << 30;
  // Internal: plan every tensor and fingerprint the plan (ConvertReport::plan), write nothing.
  bool plan_only = false;
  // Internal (--resume of a --part run): write the tensors [first, end) of the whole
  // conversion as segment `spec` of that run instead of a part's own range.
  struct Segment {
    bool active = false;
    size_t first = 0, end = 0;
    PartSpec spec;
  } segment;
};

// The layout a tensor gets, as the report shows it (tensor_desc_to_json()'s "layout"), kept
// typed: a JSON object for each of 10^6 tensors took 200 MB of a dry run (issue 24 item 10).
struct OutcomeLayout {
  LayoutKind kind = LayoutKind::kRowMajor;
  bool padded = false;  // a tiled matrix whose padded size is known (matrix_geometry)
  uint64_t tile_n = 0, tile_k = 0, padded_n = 0, padded_k = 0;
  static OutcomeLayout of(const TensorDesc& d);
  nlohmann::json to_json() const;
};

struct TensorOutcome {
  std::string name;
  std::string from, to, why;  // formats, and the reason for the choice
  bool requantized = false;   // decoded and re-encoded
  bool lossy_requant = false; // a quantized source re-encoded into another quantized format
  uint64_t bytes = 0;
  OutcomeLayout layout;
  std::shared_ptr<QualityStats> quality;  // requantized tensors only
};

struct ConvertReport {
  WriteSummary written;
  uint64_t source_bytes = 0;
  size_t tensors = 0;
  size_t quantized_tensors = 0;
  std::vector<std::string> warnings;
  double seconds = 0;
  std::vector<TensorOutcome> outcomes;
  uint64_t planned_bytes = 0;  // archive size (dry run included)
  uint64_t predicted_peak_rss = 0;  // bytes (converter/pipeline/memory_plan.h)
  uint64_t chunk_floats = 0;        // the requantization chunk chosen
  int workers = 0;                  // chunks requantized at once
  bool dry_run = false;             // a plan: nothing was written (the JSON says "dry_run": true)
  PartSpec part;                    // a part run: the outcomes are its tensors'
  size_t total_tensors = 0;         // a part run: the whole conversion's
  uint64_t plan = 0;                // the plan fingerprint (part and plan-only runs: converter/pipeline/parts.h)
  nlohmann::json part_record;       // a part run: the record its file carries
  uint64_t part_file_reserve = 0;   // a part run: the manifest room its own file reserves
  std::optional<ShardReport> shard;  // --tp/--ep: the rank archives written
  size_t resumed_segments = 0;      // --resume: segments a killed run had committed, reused
  nlohmann::json to_json() const;
};

// The source is a snapshot folder, a safetensors file, a Hugging Face repo id (from the local
// cache), a .iris v1 archive (with options.config) or a .iris v2 archive or archive set (read
// in place: sources/archive_snapshot.cpp).
Result<ConvertReport> run_convert(const ConvertOptions& options);

// The tensors' final sizes, as the writer settled them (an NF4 tensor's late descriptor may
// change its later components' sizes): the outcomes are in the writer's tensor order.
// An archive set's files (WriteSummary::set_files) as the reports list them: [{path, bytes}].
nlohmann::json set_files_json(const WriteSummary& written);
void take_final_sizes(const WriteSummary& written, ConvertReport& report);
// The report as JSON (`--report FILE`), written whole or not at all.
Status write_report_file(const std::string& path, const ConvertReport& report, bool overwrite, PartialFileRegistry* registry);

}  // namespace iris
