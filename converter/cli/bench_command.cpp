#include "converter/cli/bench_command.h"

#include <cstdio>
#include <fstream>

#include "common/status.h"
#include "converter/cli/exit_codes.h"
#include "converter/cli/json_errors.h"

#ifdef IRIS_HAVE_CUDA
#include "formats/iris_archive.h"
#include "bench/kernels/kernel_bench.h"
#include "formats/json_text.h"
#endif

namespace iris {

#ifndef IRIS_HAVE_CUDA
int run_bench_command(const BenchCommandOptions& o) {
  return cli_fail(Status::error(ErrorKind::kNoDevice, "bench: this iris was built without CUDA (configure with -DIRIS_CUDA=ON)"),
                  o.json ? "bench" : nullptr);
}
#else

namespace {

// The shapes of the kernel goals (issues 4 and 11): a 14336x4096 MLP weight, a small
// 4096x1024 one, and gpt-oss-20b's two expert layers (32 experts of 5760x2880 gate_up and
// 2880x2880 down; stacks also time the grouped expert GEMV of one token's top 4).
const char* const kDefaultCases[] = {"mxfp4:14336x4096",   "nf4:14336x4096",     "fp8:14336x4096",     "mxfp4:4096x1024",
                                     "nf4:4096x1024",      "fp8:4096x1024",      "mxfp4:32x5760x2880", "nf4:32x5760x2880",
                                     "fp8:32x5760x2880",   "mxfp4:32x2880x2880", "nf4:32x2880x2880",   "fp8:32x2880x2880"};

}  // namespace

int run_bench_command(const BenchCommandOptions& o) {
  // With --json every failure (no GPU included) is also a JSON document on stdout.
  auto fail = [&](const Status& s) { return cli_fail(s, o.json ? "bench" : nullptr); };
  BenchOptions bench_options;
  for (const auto& v : o.variants) {
    const auto eq = v.find('=');
    Status st = eq == std::string::npos ? usage_error("--variant '" + v + "': expected NAME=VALUE")
                                        : parse_kernel_variant(v.substr(0, eq), v.substr(eq + 1), &bench_options);
    if (!st.is_ok()) return fail(usage_error("--variant: " + st.message()));
  }
  unsigned long long tile_n = 0, tile_k = 0;
  if (std::sscanf(o.tile.c_str(), "%llux%llu", &tile_n, &tile_k) != 2 || tile_n == 0 || tile_k == 0)
    return fail(usage_error("--tile '" + o.tile + "': expected TILE_NxTILE_K, e.g. 16x256"));
  std::vector<BenchCase> cases;
  if (!o.archive.empty()) {
    auto a = IrisArchive::open(o.archive);
    if (!a.is_ok()) return fail(a.status());
    for (const auto& t : a->manifest().tensors)
      if (is_quantized(t.desc.format)) cases.push_back({t.desc.name, t.desc, t.desc.layout.kind == LayoutKind::kTiled ? o.batches : std::vector<int>{}});
  }
  std::vector<std::string> specs = o.synthetic;
  if (specs.empty() && o.archive.empty()) specs.assign(std::begin(kDefaultCases), std::end(kDefaultCases));
  for (const auto& spec : specs) {
    auto colon = spec.find(':');
    if (colon == std::string::npos) return fail(usage_error("--synthetic '" + spec + "': expected FORMAT:SHAPE"));
    auto d = synthetic_desc(spec.substr(0, colon), spec.substr(colon + 1), tile_n, tile_k);
    if (!d.is_ok()) return fail(d.status());
    const bool big = d->shape.size() == 2;
    cases.push_back({spec.substr(0, colon) + " " + spec.substr(colon + 1), *d, big ? o.batches : std::vector<int>{}});
  }
  bench_options.replays = o.replays;
  bench_options.floors = o.floors;
  bench_options.l2_hot = o.l2_hot;
  auto r = run_kernel_bench(cases, bench_options);
  if (!r.is_ok()) return fail(r.status());
  nlohmann::json& j = *r;
  if (!o.peers.empty()) {
    std::ifstream in(o.peers);
    nlohmann::json peers;
    try {
      in >> peers;
    } catch (const std::exception& e) {
      return fail(invalid_input(o.peers + ": invalid peer JSON: " + e.what()));
    }
    j["peer_copy_gbps"] = peers.value("copy_gbps", 0.0);
    for (auto& res : j["results"])
      for (const auto& p : peers.value("results", nlohmann::json::array()))
        // Typed comparisons: std::string == json is ambiguous under C++20's rewritten operators
        // with GCC 13 and nlohmann_json 3.11 (Ubuntu 24.04).
        if (p.value("kernel", "") == res["kernel"].get<std::string>() && p.value("case", "") == res["case"].get<std::string>() &&
            p.value("batch", -1) == res["batch"].get<int>())
          res["peers"].push_back({{"peer", p.value("peer", "")}, {"us", p.value("us", 0.0)},
                                  {"speedup", p.value("us", 0.0) / res["us"].get<double>()}});
  }
  j["variants"] = o.variants;
  j["tile"] = o.tile;
  if (o.json) {
    std::printf("%s\n", dump_json(j, 2).c_str());
    return 0;
  }
  std::printf("device %s, copy bandwidth %.0f GB/s (read+write, measured now: cudaMemcpy %.0f, copy kernel %.0f)\n",
              j["device"].get<std::string>().c_str(), j["copy_gbps"].get<double>(), j["copy_memcpy_gbps"].get<double>(),
              j["copy_kernel_gbps"].get<double>());
  std::printf("%-8s %-26s %5s %10s %9s %7s %-5s %s\n", "kernel", "case", "batch", "us", "GB/s", "%copy", "path", "peer");
  for (const auto& res : j["results"]) {
    std::string peer;
    for (const auto& p : res.value("peers", nlohmann::json::array())) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %.1f us (iris %.2fx faster)", peer.empty() ? "" : "; ", p["peer"].get<std::string>().c_str(),
                    p["us"].get<double>(), p["speedup"].get<double>());
      peer += buf;
    }
    const std::string path = res.value("path", "");
    std::printf("%-8s %-26s %5d %10.2f %9.0f %6.1f%% %-5s %s\n", res["kernel"].get<std::string>().c_str(), res["case"].get<std::string>().c_str(),
                res["batch"].get<int>(), res["us"].get<double>(), res["gbps"].get<double>(), res["pct_copy"].get<double>(),
                path == "tensor-cores" ? "tc" : path == "cuda-cores" ? "cc" : "", peer.c_str());
  }
  return 0;
}
#endif

}  // namespace iris
