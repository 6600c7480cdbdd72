#include "broker/ws/json_command.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace ringcast::broker::ws {
namespace {

using Type = JsonCommand::Type;

JsonCommand ok(std::string_view text) {
  auto r = parse_json_command(text);
  EXPECT_TRUE(r.has_value()) << text << " -> " << (r ? "" : r.error());
  return r ? *r : JsonCommand{};
}

std::string err(std::string_view text) {
  auto r = parse_json_command(text);
  EXPECT_FALSE(r.has_value()) << text;
  return r ? std::string() : r.error();
}

TEST(JsonCommandTest, ParsesPopSubsCommands) {
  auto c = ok(R"({"type":"auth","token":"abc.def.ghi"})");
  EXPECT_EQ(c.type, Type::kAuth);
  EXPECT_EQ(c.token, "abc.def.ghi");
  c = ok(R"({"type": "subscribe", "topic": "chat"})");
  EXPECT_EQ(c.type, Type::kSubscribe);
  EXPECT_EQ(c.topic, "chat");
  c = ok(R"({"type":"unsubscribe","topic":"md.*"})");
  EXPECT_EQ(c.type, Type::kUnsubscribe);
  EXPECT_EQ(c.topic, "md.*");
  c = ok(R"({"type":"publish","topic":"chat","payload":"Hello"})");
  EXPECT_EQ(c.type, Type::kPublish);
  EXPECT_EQ(c.payload, "Hello");
  EXPECT_FALSE(c.message_id.has_value());
  EXPECT_EQ(c.qos, 0);
  c = ok(R"({"type":"publish","topic":"critical","payload":"Important","message_id":"id-123","qos":1})");
  EXPECT_EQ(c.message_id, "id-123");
  EXPECT_EQ(c.qos, 1);
  c = ok(R"({"type":"ack","message_id":"id-123"})");
  EXPECT_EQ(c.type, Type::kAck);
  EXPECT_EQ(c.message_id, "id-123");
  c = ok(R"({"type":"ack","message_id":42})");
  EXPECT_EQ(c.message_id, "42");
}

TEST(JsonCommandTest, ParsesQosOneSubscribesAndTopicsOfAcks) {
  auto c = ok(R"({"type":"subscribe","topic":"t","qos":1,"client_id":"dash-1"})");
  EXPECT_EQ(c.qos, 1);
  EXPECT_EQ(c.client_id, "dash-1");
  c = ok(R"({"type":"subscribe","topic":"t"})");
  EXPECT_EQ(c.qos, 0);
  EXPECT_EQ(c.client_id, "");
  c = ok(R"({"type":"ack","message_id":7,"topic":"t"})");
  EXPECT_EQ(c.message_id, "7");
  EXPECT_EQ(c.topic, "t");
  EXPECT_EQ(ok(R"({"type":"ack","message_id":7})").topic, "");
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","qos":2})"), "subscribe: \"qos\" must be 0 or 1");
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","client_id":""})"),
            "subscribe: \"client_id\" must be a non-empty string without NUL");
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","client_id":"a\u0000b"})"),
            "subscribe: \"client_id\" must be a non-empty string without NUL")
      << "the store's session keys are client id ++ NUL ++ channel";
  EXPECT_EQ(err(R"({"type":"ack","message_id":7,"topic":3})"), "ack: \"topic\" must be a string");
}

TEST(JsonCommandTest, ParsesPopSubsLoginAndItsNullOptionals) {
  EXPECT_EQ(ok(R"({"type":"login","username":"admin","password":"password"})").type, Type::kLogin);
  // serde writes PopSub's Option fields as null when absent.
  auto c = ok(R"({"type":"publish","topic":"t","payload":"x","message_id":null,"qos":null})");
  EXPECT_EQ(c.qos, 0);
  EXPECT_FALSE(c.qos_given);
  EXPECT_FALSE(c.message_id.has_value());
  c = ok(R"({"type":"subscribe","topic":"t"})");
  EXPECT_FALSE(c.qos_given) << "PopSub's subscribe has no qos";
  c = ok(R"({"type":"subscribe","topic":"t","qos":0})");
  EXPECT_TRUE(c.qos_given);
  EXPECT_EQ(c.qos, 0);
}

TEST(JsonCommandTest, IgnoresUnknownFields) {
  const auto c = ok(R"({"type":"subscribe","topic":"a","extra":[1,2,{"x":null}]})");
  EXPECT_EQ(c.topic, "a");
}

TEST(JsonCommandTest, StringPayloadsAreTheirUtf8Bytes) {
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload":"caf\u00e9 \"q\" \n"})").payload, "caf\xc3\xa9 \"q\" \n");
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload":""})").payload, "");
}

TEST(JsonCommandTest, OtherPayloadsAreTheirCompactJson) {
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload": { "px" : 101.5, "qty": [1, 2] }})").payload,
            R"({"px":101.5,"qty":[1,2]})");
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload":42})").payload, "42");
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload":true})").payload, "true");
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload":null})").payload, "null");
}

TEST(JsonCommandTest, Base64PayloadsAreDecoded) {
  EXPECT_EQ(ok(R"({"type":"publish","topic":"t","payload":"AP8BgA==","encoding":"base64"})").payload,
            std::string("\x00\xff\x01\x80", 4));
  EXPECT_NE(err(R"({"type":"publish","topic":"t","payload":"AP8*","encoding":"base64"})").find("base64"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"publish","topic":"t","payload":"AA==","encoding":"hex"})").find("encoding"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"publish","topic":"t","payload":[1],"encoding":"base64"})").find("payload"),
            std::string::npos);
}

TEST(JsonCommandTest, RejectsWhatIsNotAJsonObject) {
  EXPECT_EQ(err("not json"), "message is not valid JSON");
  EXPECT_EQ(err(R"({"type":"subscribe")"), "message is not valid JSON");
  EXPECT_EQ(err(""), "message is not valid JSON");
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"a"} trailing)"), "message is not valid JSON");
  EXPECT_EQ(err("[1,2]"), "message must be a JSON object");
  EXPECT_EQ(err(R"("subscribe")"), "message must be a JSON object");
  EXPECT_EQ(err("17"), "message must be a JSON object");
}

TEST(JsonCommandTest, RejectsMissingOrUnknownTypes) {
  EXPECT_EQ(err(R"({"topic":"a"})"), "message has no \"type\"");
  EXPECT_EQ(err(R"({"type":1,"topic":"a"})"), "\"type\" must be a string");
  EXPECT_EQ(err(R"({"type":"SUBSCRIBE","topic":"a"})"),
            "unknown type \"SUBSCRIBE\" (expected auth, subscribe, unsubscribe, publish or ack)");
  const std::string long_type = R"({"type":")" + std::string(1000, 'x') + R"("})";
  EXPECT_EQ(err(long_type), "unknown type (expected auth, subscribe, unsubscribe, publish or ack)");
}

TEST(JsonCommandTest, RejectsMissingOrWrongTypedFields) {
  EXPECT_EQ(err(R"({"type":"subscribe"})"), "subscribe: \"topic\" is missing");
  EXPECT_EQ(err(R"({"type":"subscribe","topic":7})"), "subscribe: \"topic\" must be a string");
  EXPECT_EQ(err(R"({"type":"unsubscribe","topic":""})"), "unsubscribe: \"topic\" must not be empty");
  EXPECT_EQ(err(R"({"type":"publish","topic":"t"})"), "publish: \"payload\" is missing");
  EXPECT_EQ(err(R"({"type":"publish","payload":"x"})"), "publish: \"topic\" is missing");
  EXPECT_EQ(err(R"({"type":"publish","topic":"t","payload":"x","qos":2})"), "publish: \"qos\" must be 0 or 1");
  EXPECT_EQ(err(R"({"type":"publish","topic":"t","payload":"x","qos":"1"})"), "publish: \"qos\" must be 0 or 1");
  EXPECT_EQ(err(R"({"type":"publish","topic":"t","payload":"x","qos":1.5})"), "publish: \"qos\" must be 0 or 1");
  EXPECT_EQ(err(R"({"type":"publish","topic":"t","payload":"x","message_id":[1]})"),
            "publish: \"message_id\" must be a string or a non-negative integer");
  EXPECT_EQ(err(R"({"type":"auth"})"), "auth: \"token\" is missing");
  EXPECT_EQ(err(R"({"type":"auth","token":null})"), "auth: \"token\" must be a string");
  EXPECT_EQ(err(R"({"type":"ack"})"), "ack: \"message_id\" is missing");
  EXPECT_EQ(err(R"({"type":"ack","message_id":-1})"), "ack: \"message_id\" must be a string or a non-negative integer");
}

TEST(JsonCommandTest, SubscribeTakesSinceOrHistory) {
  const JsonCommand since = ok(R"({"type":"subscribe","topic":"t","since":{"offset":17,"epoch":"ab"}})");
  ASSERT_TRUE(since.since.has_value());
  EXPECT_EQ(since.since->offset, 17u);
  EXPECT_EQ(since.since->epoch, "ab");
  EXPECT_FALSE(since.history.has_value());
  const JsonCommand last = ok(R"({"type":"subscribe","topic":"t","history":5})");
  EXPECT_EQ(last.history, 5u);
  EXPECT_FALSE(last.since.has_value());
  const JsonCommand plain = ok(R"({"type":"subscribe","topic":"t","since":null})");
  EXPECT_FALSE(plain.since || plain.history);
  const std::string bad_since = R"(subscribe: "since" must be {"offset": a non-negative integer, "epoch": a string})";
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","since":{"offset":-1,"epoch":"e"}})"), bad_since);
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","since":{"offset":1}})"), bad_since);
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","since":{"offset":1,"epoch":2}})"), bad_since);
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","since":5})"), bad_since);
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","history":"5"})"),
            "subscribe: \"history\" must be a non-negative integer");
  EXPECT_EQ(err(R"({"type":"subscribe","topic":"t","history":1,"since":{"offset":1,"epoch":"e"}})"),
            "subscribe: \"since\" and \"history\" exclude each other");
}

TEST(JsonCommandTest, RejectsDeepNestingWithoutRecursing) {
  std::string deep = R"({"type":"publish","topic":"t","payload":)";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(err(deep), "message nested deeper than 64 levels");
  std::string fine = R"({"type":"publish","topic":"t","payload":)";
  fine += std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_EQ(ok(fine).payload, std::string(60, '[') + std::string(60, ']'));
}

}  // namespace
}  // namespace ringcast::broker::ws
