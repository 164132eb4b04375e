// core/text_file.hpp: a whole file, bytes as they are, and a sentence naming the file when it
// cannot be opened.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/text_file.hpp"

namespace tessera {
namespace {

TEST(TextFile, ReadsEveryByteAndNamesAFileItCannotOpen) {
  char path[] = "/tmp/tessera_text_file_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string bytes = std::string("{\"a\": 1}\n\r\n", 11) + std::string(1, '\0') + "tail";
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  std::string text = "left over";
  ASSERT_EQ(readTextFile(path, "the test file", &text), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(text, bytes);
  unlink(path);

  text = "kept";
  EXPECT_EQ(readTextFile(path, "the test file", &text), tsrInvalidArgument);
  const std::string why = lastErrorMessage();
  EXPECT_NE(why.find(std::string("cannot open the test file ") + path), std::string::npos) << why;
  EXPECT_EQ(text, "kept");  // nothing is overwritten on failure
}

}  // namespace
}  // namespace tessera
