// The model folder the Apple driver writes for the framework (runtime/ane/ane_plan.h): its layout,
// its files, who shares it, and its files kept across an unload that removes them. Suites carry
// "anesim" so `ctest -R anesim` runs them with the rest of the ANE-runtime work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/ane/ane_plan.h"
#include "runtime/driver.h"
#include "support.h"

namespace orion::runtime::ane {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

TEST(AneModelDir_anesim, ModelFolderIsTmpSlashHexIdentifier) {
  ModelDir d = model_dir_layout("/var/folders/T/", "0A1B2C_3d");
  EXPECT_EQ(d.root, "/var/folders/T/0A1B2C_3d");
  EXPECT_EQ(d.mil_path, "/var/folders/T/0A1B2C_3d/model.mil");
  EXPECT_EQ(d.weights_dir, "/var/folders/T/0A1B2C_3d/weights");
  WeightEntry e{"@model_path/weights/wq.bin", "weights/wq.bin", 0, nullptr};
  EXPECT_EQ(d.path_of(e), "/var/folders/T/0A1B2C_3d/weights/wq.bin");
  for (std::string bad : {"", ".", "..", "a/b", "../etc"})
    try {
      model_dir_layout("/tmp", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), DriverStatus::CompileFailed) << bad;
    }
}

TEST(AneModelDir_anesim, ModelFolderHoldsMilAndWeightsAndDeltaReloadRewritesThem) {
  WeightDict d{{"@model_path/weights/w.bin", bytes_of("first")}, {"@model_path/weights/sub/v.bin", bytes_of("vv")}};
  ModelDir dir = model_dir_layout(test::temp_dir(), "ABCDEF");
  write_model_dir(dir, "program(1.3)\n", plan_weight_entries(d, "p"));
  EXPECT_EQ(test::read_text(dir.mil_path), "program(1.3)\n");
  EXPECT_EQ(test::read_text(dir.weights_dir + "/w.bin"), "first");
  EXPECT_EQ(test::read_text(dir.weights_dir + "/sub/v.bin"), "vv");
  WeightDict d2{{"@model_path/weights/w.bin", bytes_of("second!")}};
  write_weight_files(dir, plan_weight_entries(d2, "p"));
  EXPECT_EQ(test::read_text(dir.weights_dir + "/w.bin"), "second!");
  EXPECT_EQ(test::read_text(dir.mil_path), "program(1.3)\n");
  remove_model_dir(dir);
  EXPECT_FALSE(fs::exists(dir.root));
}

TEST(AneModelDir_anesim, SharedModelFolderGoesWithItsLastUser) {
  ModelDirUsers u;
  u.acquire("/t/A");
  u.acquire("/t/A");
  u.acquire("/t/B");
  EXPECT_EQ(u.users("/t/A"), 2);
  EXPECT_FALSE(u.release("/t/A"));
  EXPECT_TRUE(u.release("/t/A"));
  EXPECT_EQ(u.users("/t/A"), 0);
  EXPECT_FALSE(u.release("/t/A"));  // already gone
  EXPECT_TRUE(u.release("/t/B"));
}

// A folder with a weight in a sub-folder and a compiled `data` file, as the driver leaves it.
ModelDir written_folder(const std::string& id) {
  WeightDict d{{"@model_path/weights/w.bin", bytes_of("weights")}, {"@model_path/weights/sub/v.bin", bytes_of("vv")}};
  ModelDir dir = model_dir_layout(test::temp_dir(), id);
  write_model_dir(dir, "program(1.3)\n", plan_weight_entries(d, "p"));
  std::ofstream(dir.root + "/" + kCompiledDataFileName, std::ios::binary) << "compiled";
  return dir;
}

TEST(AneModelDir_anesim, FilesKeptAcrossAnUnloadThatRemovesTheFolderComeBack) {
  const ModelDir dir = written_folder("KEPT01");
  std::string kept_root;
  {
    KeptModelDir kept(dir);
    kept_root = kept.kept_root();
    EXPECT_EQ(kept_root, dir.root + ".orion-kept");
    remove_model_dir(dir);  // what the decompiled framework's unloadWithQoS: does
    ASSERT_FALSE(fs::exists(dir.root));
    EXPECT_EQ(kept.restore(), 4);
  }
  EXPECT_EQ(test::read_text(dir.mil_path), "program(1.3)\n");
  EXPECT_EQ(test::read_text(dir.weights_dir + "/w.bin"), "weights");
  EXPECT_EQ(test::read_text(dir.weights_dir + "/sub/v.bin"), "vv");
  EXPECT_EQ(test::read_text(dir.root + "/data"), "compiled");
  EXPECT_FALSE(fs::exists(kept_root)) << "the links go with the KeptModelDir";
  remove_model_dir(dir);
}

TEST(AneModelDir_anesim, AFolderTheUnloadLeftAloneIsNotTouched) {
  const ModelDir dir = written_folder("KEPT02");
  {
    KeptModelDir kept(dir);
    std::ofstream(dir.weights_dir + "/w.bin", std::ios::binary) << "rewritten";  // a new file, not the kept one
    fs::remove(dir.weights_dir + "/sub/v.bin");                                  // only this one is gone
    EXPECT_EQ(kept.restore(), 1);
    EXPECT_EQ(kept.restore(), 0);
  }
  EXPECT_EQ(test::read_text(dir.weights_dir + "/w.bin"), "rewritten");
  EXPECT_EQ(test::read_text(dir.weights_dir + "/sub/v.bin"), "vv");
  remove_model_dir(dir);
}

TEST(AneModelDir_anesim, AMissingFolderKeepsNothingAndRestoresNothing) {
  const ModelDir dir = model_dir_layout(test::temp_dir(), "KEPT03_never_written");
  KeptModelDir kept(dir);
  EXPECT_EQ(kept.restore(), 0);
  EXPECT_FALSE(fs::exists(dir.root));
}

}  // namespace
}  // namespace orion::runtime::ane
