// Tests of the line templater: masking, merging, value summaries, numbers.
#include <stdexcept>
#include <string>

#include "check.hpp"
#include "templater.hpp"

using ribbon::Analysis;
using ribbon::TemplaterConfig;
using ribbon::VarKind;

static TemplaterConfig config() {
  TemplaterConfig c;
  c.protected_words = {"error", "info", "warn", "down", "up"};
  c.severity = {{"error", 4.0}, {"down", 3.0}, {"warn", 1.5}};
  return c;
}

static bool kind_of(const std::string& t, VarKind want) {
  VarKind k = VarKind::kOther;
  return ribbon::classify_token(t, k) && k == want;
}

static bool constant(const std::string& t) {
  VarKind k = VarKind::kOther;
  return !ribbon::classify_token(t, k);
}

TEST(templater_classifies_tokens) {
  CHECK(kind_of("35ms", VarKind::kNumber));
  CHECK(kind_of("-1.5", VarKind::kNumber));
  CHECK(kind_of("98%", VarKind::kNumber));
  CHECK(kind_of("0x7f3a", VarKind::kHex));
  CHECK(kind_of("7f3a1e10ab", VarKind::kHex));
  CHECK(kind_of("10.0.0.1", VarKind::kIp));
  CHECK(kind_of("10.0.0.1:8080", VarKind::kIp));
  CHECK(kind_of("123e4567-e89b-12d3-a456-426614174000", VarKind::kUuid));
  CHECK(kind_of("2026-12-01T10:00:01.123Z", VarKind::kTime));
  CHECK(kind_of("10:00:01", VarKind::kTime));
  CHECK(kind_of("\"hello world\"", VarKind::kQuoted));
  CHECK(kind_of("imsi-001010000000001", VarKind::kOther));
  CHECK(kind_of("gnb-017", VarKind::kOther));
  CHECK(constant("S1"));
  CHECK(constant("T300"));
  CHECK(constant("eth0"));
  CHECK(constant("heartbeat"));
}

TEST(templater_parses_numbers) {
  double x = 0;
  CHECK(ribbon::parse_number("35ms", x) && x == 35.0);
  CHECK(ribbon::parse_number("-2.5", x) && x == -2.5);
  CHECK(!ribbon::parse_number("ms", x));
  CHECK(!ribbon::parse_number("1234567890123456789012", x));
}

TEST(templater_groups_masked_lines) {
  const Analysis a = ribbon::analyze_templates(
      "t=1 heartbeat ok seq=1\n\nt=2 heartbeat ok seq=2\nERROR link down to 10.0.0.1\nt=3 heartbeat ok seq=9",
      config());
  CHECK(a.templates.size() == 2);
  CHECK(a.line_template.size() == 5);
  CHECK(a.line_template[0] == 0 && a.line_template[1] == -1 && a.line_template[2] == 0);
  CHECK(a.line_template[3] == 1 && a.line_template[4] == 0);
  const auto& hb = a.templates[0];
  CHECK(hb.pattern == "t=<n> heartbeat ok seq=<n>");
  CHECK(hb.count == 3 && hb.first_line == 0 && hb.last_line == 4);
  CHECK(hb.vars.size() == 2 && hb.vars[1].key == "seq");
  CHECK(hb.vars[1].min == 1.0 && hb.vars[1].max == 9.0 && hb.vars[1].median == 2.0);
  CHECK(hb.vars[1].distinct == 3);
  CHECK(a.templates[1].pattern == "ERROR link down to <ip>");
  CHECK(a.line_severity[3] == 4.0f && a.line_severity[0] == 0.0f);
  CHECK(a.num_values.size() == 6 && a.num_lines[5] == 4);
}

TEST(templater_merges_one_position_but_not_protected_words) {
  const Analysis a = ribbon::analyze_templates(
      "user alice logged in\nuser bob logged in\nuser carol logged in\nuser dave logged in\nlink up on port\n"
      "link down on port",
      config());
  CHECK(a.raw_templates == 6);
  CHECK(a.templates.size() == 3);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "user <*> logged in" && a.templates[0].count == 4);
  CHECK(!a.templates.empty() && a.templates[0].vars.size() == 1 && a.templates[0].vars[0].distinct == 4 &&
        a.templates[0].vars[0].kind == VarKind::kMerged);
  TemplaterConfig off = config();
  off.merge = false;
  CHECK(ribbon::analyze_templates("user alice logged in\nuser bob logged in", off).templates.size() == 2);
}

TEST(templater_keeps_a_few_words_at_one_position_apart) {
  const std::string three = "job Starting main loop\njob Ending main loop\njob Pausing main loop";
  CHECK(ribbon::analyze_templates(three, config()).templates.size() == 3);
  TemplaterConfig always = config();
  always.word_family = 0;
  CHECK(ribbon::analyze_templates(three, always).templates.size() == 1);
  const std::string four = "job alpha main loop\njob beta main loop\njob gamma main loop\njob delta main loop";
  CHECK(ribbon::analyze_templates(four, config()).templates.size() == 1);
}

TEST(templater_keeps_event_words_at_one_position_apart_however_many) {
  // participles and gerunds say what happened: each is its own message, not a value
  const std::string four = "[unit 4] pump Spawned (state event)\n[unit 4] pump Drained (state event)\n"
                           "[unit 4] pump Restarted (state event)\n[unit 4] pump Killed (state event)";
  CHECK(ribbon::analyze_templates(four, config()).templates.size() == 4);
  // with other words among them the position is a variable again (a fourth value makes it one)
  CHECK(ribbon::analyze_templates(four + "\n[unit 4] pump alpha (state event)", config()).templates.size() == 1);
  const std::string ing = "relay Opening spool now\nrelay Closing spool now\nrelay Flushing spool now\n"
                          "relay Draining spool now\nrelay Pausing spool now";
  CHECK(ribbon::analyze_templates(ing, config()).templates.size() == 5);
}

TEST(templater_merges_a_few_words_that_are_values_elsewhere_in_the_document) {
  // the words a merged variable holds in one message are values in another message too
  const std::string granted = "lease granted to alpha by (pid=7)\nlease granted to beta by (pid=8)\n"
                              "lease granted to gamma by (pid=9)";
  CHECK(ribbon::analyze_templates(granted, config()).templates.size() == 3);
  const Analysis a = ribbon::analyze_templates(
      granted + "\nlease dropped by alpha\nlease dropped by beta\nlease dropped by gamma\nlease dropped by delta",
      config());
  CHECK(a.templates.size() == 2);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "lease granted to <*> by (pid=<n>)");
}

TEST(templater_merges_two_token_lines_only_over_many_values) {
  const std::string four = "evicting alpha\nevicting beta\nevicting gamma\nevicting delta";
  const Analysis a = ribbon::analyze_templates(four, config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "evicting <*>");
  CHECK(ribbon::analyze_templates("evicting alpha\nevicting beta\nevicting gamma", config()).templates.size() == 3);
  CHECK(ribbon::analyze_templates("queue Drained\nqueue Stalled\nqueue Resumed\nqueue Flushed", config())
            .templates.size() == 4);
  // with two tokens, one event word among the values says they are what happened: they stay apart
  CHECK(ribbon::analyze_templates("link closed\nlink reset\nlink refused\nlink timeout", config()).templates.size() ==
        4);
}

TEST(templater_keeps_top_values_in_count_order) {
  const Analysis a = ribbon::analyze_templates("cause=x\ncause=y\ncause=y\ncause=z\ncause=y\ncause=x", config());
  CHECK(a.templates.size() == 1);
  const auto& v = a.templates[0].vars[0];
  CHECK(v.top.size() == 3 && v.top[0].first == "y" && v.top[0].second == 3 && v.top[1].first == "x");
}

TEST(templater_rejects_bad_config) {
  TemplaterConfig c = config();
  c.severity = {{"not a word", 1.0}};
  auto run = [&c] { return ribbon::analyze_templates("x", c); };
  CHECK_THROWS(run(), std::invalid_argument);
}

// Issue 37: one variable, one type. A hex-looking value with or without letters is one variable.
TEST(templater_hex_values_with_or_without_letters_share_a_template) {
  const Analysis a = ribbon::analyze_templates(
      "iar 003a90fc dear 00b360e8\niar 00106210 dear 0244c1dc\niar 0010a210 dear 02440000", config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "iar <hex> dear <hex>");
  CHECK(!a.templates.empty() && a.templates[0].vars.size() == 2 && a.templates[0].vars[0].kind == VarKind::kHex);
  CHECK(a.num_values.empty());  // hex ids are not magnitudes: no outlier scoring of them
  CHECK(kind_of("3a90fc", VarKind::kHex));
  CHECK(kind_of("ffffffff", VarKind::kHex));
  CHECK(constant("accepted"));
}

TEST(templater_keeps_punctuation_after_a_variable_constant) {
  const Analysis a = ribbon::analyze_templates(
      "Received disconnect from 10.0.0.1: 11: Bye Bye\nReceived disconnect from 10.0.0.2: 12: Bye Bye", config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "Received disconnect from <ip>: <n>: Bye Bye");
}

TEST(templater_reads_an_empty_value_as_empty_not_the_next_key) {
  const Analysis a = ribbon::analyze_templates("auth failure; logname= uid=0 euid=7 ruser= rhost=10.0.0.1", config());
  CHECK(!a.templates.empty() && a.templates[0].pattern == "auth failure; logname= uid=<n> euid=<n> ruser= rhost=<ip>");
}

TEST(templater_reads_a_date_in_words_as_one_variable) {
  const Analysis a = ribbon::analyze_templates(
      "connection from 10.0.0.1 () at Sun Jul 17 01:47:22 2005\nconnection from 10.0.0.9 () at Mon Jul 18 11:07:02 2005",
      config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "connection from <ip> (<*>) at <ts>");
}

TEST(templater_keeps_names_with_a_digit_constant) {
  CHECK(constant("jk2_init()"));
  CHECK(constant("mod_jk2"));
  CHECK(constant("log4j"));
  CHECK(kind_of("blk_38865049064139660", VarKind::kOther));
  CHECK(kind_of("user_1234", VarKind::kOther));
}

TEST(templater_splits_a_name_glued_to_its_value) {
  const Analysis a = ribbon::analyze_templates("After: PendingReds:0 ContAlloc:12\nAfter: PendingReds:3 ContAlloc:9", config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "After: PendingReds:<n> ContAlloc:<n>");
  CHECK(kind_of("http://example.org/a", VarKind::kOther));
}

TEST(templater_reads_single_quotes_around_a_value_as_punctuation) {
  const Analysis a = ribbon::analyze_templates("creating device node '/udev/sda1'\ncreating device node '/udev/sdb'",
                                               config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "creating device node '<*>'");
}

TEST(templater_shows_the_unit_every_value_of_a_quantity_shares) {
  const Analysis a = ribbon::analyze_templates("renew lease for 70 seconds.\nrenew lease for 5 seconds.\n"
                                               "took 3 ms then\ntook 2 sec then", config());
  CHECK(a.templates.size() == 2);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "renew lease for <n> seconds.");
  CHECK(a.templates.size() == 2 && a.templates[1].pattern == "took <n> then");
  CHECK(!a.templates.empty() && a.templates[0].vars[0].top.size() == 2 && a.templates[0].vars[0].min == 5.0);
}

TEST(templater_reads_numbers_joined_by_underscores_as_numbers) {
  const Analysis a = ribbon::analyze_templates("Session: 30546173_4261722401 initialized\nSession: 7_12 initialized",
                                               config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "Session: <n>_<n> initialized");
}

TEST(templater_reads_a_quoted_value_before_a_colon) {
  const Analysis a = ribbon::analyze_templates("error for '0x00660011': too long\nerror for '0x0067000f': too long",
                                               config());
  CHECK(!a.templates.empty() && a.templates[0].pattern == "error for '<hex>': too long");
}

TEST(templater_reads_two_values_joined_by_a_slash_as_two) {
  const Analysis a = ribbon::analyze_templates(
      "Old: host-41/10.1.1.7:9000 New: host-41:9000\nOld: host-12/10.1.1.9:9000 New: host-12:9000", config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "Old: <*>/<ip> New: <*>");
  CHECK(kind_of("12/31/2024", VarKind::kTime));
}

TEST(templater_reads_a_quoted_phrase_after_a_key_as_one_value) {
  const Analysis a = ribbon::analyze_templates("acquire lock=7, tag=\"View Lock\", uid=1\nacquire lock=9, tag=\"wifi\", uid=2",
                                               config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "acquire lock=<n>, tag=<q>, uid=<n>");
}

TEST(templater_keeps_a_host_and_its_port_one_value) {
  const Analysis a = ribbon::analyze_templates("connect to wpad:80 failed\nconnect to proxy.example.org:5070 failed",
                                               config());
  CHECK(a.templates.size() == 1);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "connect to <*> failed");
}

TEST(templater_reads_a_list_in_words_as_one_variable) {
  const Analysis a = ribbon::analyze_templates(
      "failed to resolve an14 an15 an16 an17 an18\nfailed to resolve an3 an4 an5 an6\n"
      "Supported channels 1 2 3 4 5 6\nSupported channels 1 6 11 36", config());
  CHECK(a.templates.size() == 2);
  CHECK(!a.templates.empty() && a.templates[0].pattern == "failed to resolve <*>");
  CHECK(a.templates.size() == 2 && a.templates[1].pattern == "Supported channels <*>");
  CHECK(ribbon::analyze_templates("rx 1 2 3 ok", config()).templates[0].pattern == "rx <n> <n> <n> ok");
  const Analysis three = ribbon::analyze_templates("cannot reach db7 db8 db9\ncannot reach db1 db2 db3 db4", config());
  CHECK(three.templates.size() == 1);  // three names of one stem are a list too
  CHECK(!three.templates.empty() && three.templates[0].pattern == "cannot reach <*>");
}
