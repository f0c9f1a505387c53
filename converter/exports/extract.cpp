#include "converter/exports/extract.h"

#include <cstdio>

#include "converter/pipeline/output_guard.h"
#include "formats/iris_archive.h"

namespace iris {

Result<uint64_t> run_extract(const ExtractOptions& o) {
  IRIS_ASSIGN_OR_RETURN(IrisArchive a, IrisArchive::open(o.archive));
  bool found = false;
  std::string names;
  for (const auto& f : a.manifest().files) {
    found = found || f.name == o.name;
    names += (names.empty() ? "" : ", ") + f.name;
  }
  if (!found)
    return invalid_input(o.archive + ": no embedded file '" + o.name + "' (it holds " + (names.empty() ? std::string("none") : names) + ")");
  IRIS_ASSIGN_OR_RETURN(std::string bytes, a.read_file(o.name));  // checksum checked, decompressed
  if (o.output == "-") {
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
      return io_error("standard output: write failed");
    return uint64_t(bytes.size());
  }
  IRIS_TRY(refuse_input_as_output(o.output, {o.archive}, "output"));
  IRIS_ASSIGN_OR_RETURN(AtomicOutputFile out, AtomicOutputFile::create(o.output, o.overwrite, o.partial_files));
  IRIS_TRY(out.append({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
  IRIS_TRY(out.commit());
  return uint64_t(bytes.size());
}

}  // namespace iris
