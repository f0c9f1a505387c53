// NameIndex (common/name_index.h): positions by name, the first of equal names kept,
// across the table's growth when nothing was reserved.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/name_index.h"

namespace iris {
namespace {

struct Names {
  const std::vector<std::string>* names;
  std::string_view operator()(size_t i) const { return (*names)[i]; }
};

TEST(NameIndex, FindsEveryNameAndKeepsTheFirstOfEqualOnes) {
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) names.push_back("layers." + std::to_string(i % 4000) + ".w");
  NameIndex<Names> index(Names{&names});  // no reserve: it grows as names come
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(index.insert(i), i < 4000 ? index.npos : i - 4000) << i;
  EXPECT_EQ(index.size(), 4000u);
  for (size_t i = 0; i < 4000; ++i) EXPECT_EQ(index.find(names[i]), i);
  EXPECT_EQ(index.find("layers.4000.w"), index.npos);
  EXPECT_EQ(index.find(""), index.npos);
  EXPECT_EQ(NameIndex<Names>(Names{&names}).find("layers.0.w"), index.npos);  // empty
}

}  // namespace
}  // namespace iris
