#include "schema/schema_lock.hpp"

#include <capnp/schema.h>

#include <set>
#include <sstream>

#include "schema/auth.capnp.h"
#include "schema/cluster.capnp.h"
#include "schema/common.capnp.h"
#include "schema/egress.capnp.h"
#include "schema/guest.capnp.h"
#include "schema/operation.capnp.h"
#include "schema/sandbox.capnp.h"
#include "schema/template.capnp.h"
#include "schema/worker.capnp.h"

namespace airlock::schema {

namespace {

namespace cs = airlock::capnp_schema;

std::string short_name(capnp::Schema schema) {
  auto proto = schema.getProto();
  auto display = std::string(proto.getDisplayName().cStr());
  return display.substr(proto.getDisplayNamePrefixLength());
}

std::string type_name(capnp::Type type) {
  using W = capnp::schema::Type::Which;
  switch (type.which()) {
    case W::VOID: return "void";
    case W::BOOL: return "bool";
    case W::INT8: return "int8";
    case W::INT16: return "int16";
    case W::INT32: return "int32";
    case W::INT64: return "int64";
    case W::UINT8: return "uint8";
    case W::UINT16: return "uint16";
    case W::UINT32: return "uint32";
    case W::UINT64: return "uint64";
    case W::FLOAT32: return "float32";
    case W::FLOAT64: return "float64";
    case W::TEXT: return "text";
    case W::DATA: return "data";
    case W::LIST: return "list(" + type_name(type.asList().getElementType()) + ")";
    case W::ENUM: return "enum " + short_name(type.asEnum());
    case W::STRUCT: return "struct " + short_name(type.asStruct());
    case W::INTERFACE: return "interface " + short_name(type.asInterface());
    case W::ANY_POINTER: return "anypointer";
  }
  return "unknown";
}

void describe(capnp::StructSchema schema, std::set<std::string>& lines) {
  auto name = short_name(schema);
  for (auto field : schema.getFields()) {
    auto proto = field.getProto();
    std::ostringstream line;
    line << name << '.' << proto.getName().cStr() << " @" << proto.getOrdinal().getExplicit()
         << " :" << type_name(field.getType());
    lines.insert(line.str());
  }
}

void describe(capnp::EnumSchema schema, std::set<std::string>& lines) {
  auto name = short_name(schema);
  for (auto enumerant : schema.getEnumerants())
    lines.insert(name + '.' + enumerant.getProto().getName().cStr() + " @"
                 + std::to_string(enumerant.getOrdinal()) + " :enumerant");
}

} // namespace

std::string describe_compiled_schema() {
  std::set<std::string> lines;
  describe(capnp::Schema::from<cs::ErrorInfo>(), lines);
  describe(capnp::Schema::from<cs::KeyValue>(), lines);
  describe(capnp::Schema::from<cs::Resources>(), lines);
  describe(capnp::Schema::from<cs::OperationState>(), lines);
  describe(capnp::Schema::from<cs::OperationRecord>(), lines);
  describe(capnp::Schema::from<cs::SandboxState>(), lines);
  describe(capnp::Schema::from<cs::EgressProfile>(), lines);
  describe(capnp::Schema::from<cs::EgressPolicy>(), lines);
  describe(capnp::Schema::from<cs::SandboxSpec>(), lines);
  describe(capnp::Schema::from<cs::SandboxRecord>(), lines);
  describe(capnp::Schema::from<cs::SnapshotKind>(), lines);
  describe(capnp::Schema::from<cs::SnapshotRecord>(), lines);
  describe(capnp::Schema::from<cs::TemplateVersionState>(), lines);
  describe(capnp::Schema::from<cs::TemplateVersion>(), lines);
  describe(capnp::Schema::from<cs::PoolSettings>(), lines);
  describe(capnp::Schema::from<cs::TemplateRecord>(), lines);
  describe(capnp::Schema::from<cs::TemplateBuild>(), lines);
  describe(capnp::Schema::from<cs::TemplateBuilt>(), lines);
  describe(capnp::Schema::from<cs::TemplateProgress>(), lines);
  describe(capnp::Schema::from<cs::WorkerRegistration>(), lines);
  describe(capnp::Schema::from<cs::WorkerHeartbeat>(), lines);
  describe(capnp::Schema::from<cs::ApiKeyRole>(), lines);
  describe(capnp::Schema::from<cs::ApiKeyRecord>(), lines);
  describe(capnp::Schema::from<cs::JoinTokenRecord>(), lines);
  describe(capnp::Schema::from<cs::RevokedWorker>(), lines);
  describe(capnp::Schema::from<cs::GuestStart>(), lines);
  describe(capnp::Schema::from<cs::GuestStdin>(), lines);
  describe(capnp::Schema::from<cs::GuestCloseStdin>(), lines);
  describe(capnp::Schema::from<cs::GuestSignal>(), lines);
  describe(capnp::Schema::from<cs::GuestResize>(), lines);
  describe(capnp::Schema::from<cs::GuestCredit>(), lines);
  describe(capnp::Schema::from<cs::GuestFileRead>(), lines);
  describe(capnp::Schema::from<cs::GuestWriteBegin>(), lines);
  describe(capnp::Schema::from<cs::GuestWriteChunk>(), lines);
  describe(capnp::Schema::from<cs::GuestWriteEnd>(), lines);
  describe(capnp::Schema::from<cs::GuestListDir>(), lines);
  describe(capnp::Schema::from<cs::GuestStat>(), lines);
  describe(capnp::Schema::from<cs::GuestMkdir>(), lines);
  describe(capnp::Schema::from<cs::GuestRemove>(), lines);
  describe(capnp::Schema::from<cs::GuestRename>(), lines);
  describe(capnp::Schema::from<cs::GuestPing>(), lines);
  describe(capnp::Schema::from<cs::GuestStatsRequest>(), lines);
  describe(capnp::Schema::from<cs::HostToGuest>(), lines);
  describe(capnp::Schema::from<cs::GuestLimits>(), lines);
  describe(capnp::Schema::from<cs::GuestHello>(), lines);
  describe(capnp::Schema::from<cs::GuestStarted>(), lines);
  describe(capnp::Schema::from<cs::GuestOutput>(), lines);
  describe(capnp::Schema::from<cs::GuestExited>(), lines);
  describe(capnp::Schema::from<cs::GuestFileType>(), lines);
  describe(capnp::Schema::from<cs::GuestFileInfo>(), lines);
  describe(capnp::Schema::from<cs::GuestFileData>(), lines);
  describe(capnp::Schema::from<cs::GuestFileStat>(), lines);
  describe(capnp::Schema::from<cs::GuestFileList>(), lines);
  describe(capnp::Schema::from<cs::GuestFileDone>(), lines);
  describe(capnp::Schema::from<cs::GuestError>(), lines);
  describe(capnp::Schema::from<cs::GuestPong>(), lines);
  describe(capnp::Schema::from<cs::GuestStats>(), lines);
  describe(capnp::Schema::from<cs::GuestToHost>(), lines);
  describe(capnp::Schema::from<cs::NodeSandbox>(), lines);
  describe(capnp::Schema::from<cs::ExecSpec>(), lines);
  describe(capnp::Schema::from<cs::ProcessUser>(), lines);
  describe(capnp::Schema::from<cs::ProcessView>(), lines);
  describe(capnp::Schema::from<cs::OutputRequest>(), lines);
  describe(capnp::Schema::from<cs::OutputSegment>(), lines);
  describe(capnp::Schema::from<cs::OutputBatch>(), lines);
  describe(capnp::Schema::from<cs::FileVerb>(), lines);
  describe(capnp::Schema::from<cs::FileSpec>(), lines);
  describe(capnp::Schema::from<cs::FileEntry>(), lines);
  describe(capnp::Schema::from<cs::FileResult>(), lines);
  describe(capnp::Schema::from<cs::PlacementRequest>(), lines);
  describe(capnp::Schema::from<cs::RegistrationAck>(), lines);
  describe(capnp::Schema::from<cs::WorkerView>(), lines);
  describe(capnp::Schema::from<cs::CredentialScope>(), lines);
  describe(capnp::Schema::from<cs::Credential>(), lines);
  describe(capnp::Schema::from<cs::CredentialGrant>(), lines);
  describe(capnp::Schema::from<cs::AuditRecord>(), lines);
  std::string out;
  for (const auto& line : lines)
    out += line + '\n';
  return out;
}

std::map<std::string, std::string> parse_schema_lock(std::string_view text) {
  std::map<std::string, std::string> members;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    members[line.substr(0, line.find(' '))] = line;
  }
  return members;
}

} // namespace airlock::schema
