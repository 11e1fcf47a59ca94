// The save image of unetback-xl save/restore: what goes in comes back, and anything else is
// refused rather than half-restored.
#include "tools/xl/save_image.hpp"

#include <gtest/gtest.h>

namespace unetback::toolstack {
namespace {

SavedDomain two_vif_domain() {
  SavedDomain d;
  d.name = "g1";
  d.uuid = "0c6f5b8e-1b9f-4a6e-9c1d-2f6a7b8c9d0e";
  d.guest_pid = 4242;
  VifSpec a;
  a.devid = DevId{0};
  a.mac = "00:16:3e:00:00:11";
  a.bridge = "xlbr0";
  a.script = "/etc/xen/scripts/vif-bridge";
  VifSpec b;
  b.devid = DevId{3};
  b.mac = "00:16:3e:00:00:12";
  b.script = "/etc/xen/scripts/vif-route";
  b.vifname = "guestnet";
  b.ip = "10.0.0.2 10.0.0.3";
  b.gatewaydev = "eth0";
  b.rate = "62500,50000";
  b.mtu = 9000;
  b.trusted = false;
  d.vifs = {a, b};
  return d;
}

TEST(SaveImage, WhatIsSavedComesBack) {
  const SavedDomain d = two_vif_domain();
  const auto text = format_save_image(d);
  ASSERT_TRUE(text);
  EXPECT_TRUE(text->starts_with("unetback-xl-save 1\nname g1\n")) << *text;
  const auto back = parse_save_image(*text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name, d.name);
  EXPECT_EQ(back->uuid, d.uuid);
  EXPECT_EQ(back->guest_pid, d.guest_pid);
  ASSERT_EQ(back->vifs.size(), 2U);
  for (std::size_t i = 0; i < 2; ++i) {
    const VifSpec& want = d.vifs[i];
    const VifSpec& got = back->vifs[i];
    EXPECT_EQ(got.devid, want.devid);
    EXPECT_EQ(got.mac, want.mac);
    EXPECT_EQ(got.bridge, want.bridge);
    EXPECT_EQ(got.script, want.script);
    EXPECT_EQ(got.vifname, want.vifname);
    EXPECT_EQ(got.ip, want.ip);  // spaces inside a value survive
    EXPECT_EQ(got.gatewaydev, want.gatewaydev);
    EXPECT_EQ(got.rate, want.rate);
    EXPECT_EQ(got.mtu, want.mtu);
    EXPECT_EQ(got.trusted, want.trusted);
  }
}

TEST(SaveImage, AValueWithANewlineIsNotWritten) {
  SavedDomain d = two_vif_domain();
  d.vifs[0].bridge = "br0\nname evil";
  EXPECT_EQ(format_save_image(d).error(), std::errc::invalid_argument);
}

TEST(SaveImage, AnythingElseIsRefused) {
  const std::string good = *format_save_image(two_vif_domain());
  for (const std::string& bad : {
           std::string(),                                              // empty
           "unetback-xl-save 2\n" + good.substr(good.find('\n') + 1),  // another version
           good.substr(0, good.size() - 1),                            // the last line cut short
           good + "colour blue\n",                                     // an unknown key
           good + "vif 0 colour blue\n",                               // an unknown vif field
           good + "vif 9 bridge br0\n",                                // a vif without its mac
           good + "vif 70000 mac 00:16:3e:00:00:13\n",                 // a devid out of range
           good + "vif 0 mtu 12\n",                                    // an MTU out of range
           good + "vif 0 trusted yes\n",                               // not 0 or 1
           good + "guest-pid -1\n",                                    // not a pid
           std::string("unetback-xl-save 1\nname g1\nguest-pid 1\n"),  // no vif
           std::string(
               "unetback-xl-save 1\nguest-pid 1\nvif 0 mac 00:16:3e:00:00:11\n"),  // no name
       })
    EXPECT_EQ(parse_save_image(bad).error(), std::errc::invalid_argument) << bad;
}

}  // namespace
}  // namespace unetback::toolstack
