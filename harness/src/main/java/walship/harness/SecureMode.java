package walship.harness;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.security.access.AccessController;
import org.apache.hadoop.hbase.zookeeper.ZKAuthentication;
import org.apache.hadoop.hbase.util.DNS;
import org.apache.hadoop.security.SecurityUtil;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hbase.thirdparty.com.google.gson.JsonElement;
import org.apache.hbase.thirdparty.com.google.gson.JsonObject;
import org.apache.hbase.thirdparty.com.google.gson.JsonParser;

/**
 * The harness's secure mode ({@code --secure file.json}): Kerberos for HBase's RPC, its
 * ZooKeeper client (SASL, so HBase's znodes get {@code sasl:} ACLs), the MiniDFSCluster (with
 * WebHDFS behind SPNEGO) and the Thrift servers (SASL GSSAPI; the HTTP one SPNEGO), configured
 * as HBase's own secure tests do (HBaseKerberosUtils, SecureTestCluster,
 * TestThriftSpnegoHttpServer).
 *
 * <p>The file: {@code {"krb5_conf": path, "realm": "EXAMPLE.COM", "keytab": path (the service
 * principal's keys for every host name), "principal": "hbase/_HOST@REALM", "spnego_principal":
 * "HTTP/_HOST@REALM", "spnego_keytab": path, "superusers": ["walship"], "access_control": true}};
 * all but krb5_conf, realm and keytab optional.
 *
 * <p>{@code _HOST} is the host name HBase's Thrift servers resolve for themselves (the JVM's
 * canonical local host name, {@link #serviceHost()}); the master and region servers are given
 * the same host name, so every service principal is {@code <service>/<serviceHost>@REALM}.
 */
final class SecureMode {
  final String krb5Conf;
  final String realm;
  final String keytab;
  final String principal;
  final String spnegoPrincipal;
  final String spnegoKeytab;
  final List<String> superusers = new ArrayList<>();
  final boolean accessControl;
  final String serviceHost;

  private SecureMode(JsonObject o) throws IOException {
    krb5Conf = required(o, "krb5_conf");
    realm = required(o, "realm");
    keytab = required(o, "keytab");
    principal = optional(o, "principal", "hbase/_HOST@" + realm);
    spnegoPrincipal = optional(o, "spnego_principal", "HTTP/_HOST@" + realm);
    spnegoKeytab = optional(o, "spnego_keytab", keytab);
    if (o.has("superusers")) {
      for (JsonElement e : o.getAsJsonArray("superusers")) {
        superusers.add(e.getAsString());
      }
    }
    accessControl = !o.has("access_control") || o.get("access_control").getAsBoolean();
    for (String file : List.of(krb5Conf, keytab, spnegoKeytab)) {
      if (!new File(file).canRead()) {
        throw new IllegalArgumentException("--secure: cannot read " + file);
      }
    }
    // before any Kerberos class reads it (the Python side passes it on the command line too)
    System.setProperty("java.security.krb5.conf", krb5Conf);
    serviceHost = serviceHost();
  }

  /** Reads the {@code --secure} file. */
  static SecureMode read(String path) throws IOException {
    String text = Files.readString(new File(path).toPath(), StandardCharsets.UTF_8);
    return new SecureMode(JsonParser.parseString(text).getAsJsonObject());
  }

  /** What HBase's Thrift servers put for {@code _HOST} (ThriftServer.setupParamters). */
  static String serviceHost() throws IOException {
    return org.apache.hadoop.hbase.util.Strings.domainNamePointerToHostName(
      DNS.getDefaultHost("default", "default"));
  }

  /** The cluster's settings; {@code --conf} settings, applied after these, win. */
  void configure(Configuration conf, boolean hdfs) {
    conf.set("hadoop.security.authentication", "kerberos");
    conf.set("hbase.security.authentication", "kerberos");
    conf.setBoolean("hbase.security.authorization", true);
    conf.set("hbase.rpc.protection", "authentication");
    conf.set("hbase.master.kerberos.principal", principal);
    conf.set("hbase.master.keytab.file", keytab);
    conf.set("hbase.regionserver.kerberos.principal", principal);
    conf.set("hbase.regionserver.keytab.file", keytab);
    // the servers' names carry the host their principals are made with
    conf.set("hbase.master.hostname", serviceHost);
    conf.set("hbase.unsafe.regionserver.hostname", serviceHost);
    // HBase's ZooKeeper client logs in (ZKAuthentication.loginClient): its znodes get the ACL
    // sasl:<hbase's short name> (creator) plus sasl:<superuser> for every hbase.superuser
    conf.set("hbase.zookeeper.client.kerberos.principal", principal);
    conf.set("hbase.zookeeper.client.keytab.file", keytab);
    conf.setStrings("hbase.superuser", superusers.toArray(new String[0]));
    conf.setLong("hbase.master.maxclockskew", 90000);
    if (accessControl) {
      String ac = AccessController.class.getName();
      conf.set("hbase.coprocessor.master.classes", ac);
      conf.set("hbase.coprocessor.region.classes", ac);
      conf.set("hbase.coprocessor.regionserver.classes", ac);
    }
    // the Thrift servers (hbase.thrift.security.qop may be changed with --conf)
    conf.set("hbase.thrift.security.qop", "authentication");
    conf.set("hbase.thrift.kerberos.principal", principal);
    conf.set("hbase.thrift.keytab.file", keytab);
    conf.set("hbase.thrift.spnego.principal", spnegoPrincipal);
    conf.set("hbase.thrift.spnego.keytab.file", spnegoKeytab);
    // the HTTP Thrift server runs each call as its SPNEGO user, impersonated by hbase
    String shortName = principal.split("[/@]")[0];
    conf.set("hadoop.proxyuser." + shortName + ".hosts", "*");
    conf.set("hadoop.proxyuser." + shortName + ".groups", "*");
    if (hdfs) {
      // NameNode and DataNode run as the HBase principal (HBaseKerberosUtils does the same),
      // which makes hbase HDFS's superuser. Its host is spelled out: the MiniDFSCluster gives
      // its DataNode the host name 127.0.0.1, and the JVM has one login user for all
      String service = resolved(principal);
      conf.set("dfs.namenode.kerberos.principal", service);
      conf.set("dfs.namenode.keytab.file", keytab);
      conf.set("dfs.datanode.kerberos.principal", service);
      conf.set("dfs.datanode.keytab.file", keytab);
      conf.setBoolean("dfs.block.access.token.enable", true);
      // WebHDFS (how walship reads WALs) over plain HTTP behind SPNEGO; "*" accepts a ticket
      // for any HTTP/<host> in the keytab, so a client may name the NameNode as it likes
      conf.set("dfs.web.authentication.kerberos.principal", "*");
      conf.set("dfs.web.authentication.kerberos.keytab", spnegoKeytab);
      conf.set("dfs.namenode.kerberos.internal.spnego.principal", resolved(spnegoPrincipal));
      // Hadoop 3.3 puts the NameNode's HTTP server (WebHDFS too) behind one AuthFilter set up
      // from hadoop.http.authentication.*, whose default type is simple (anonymous allowed)
      conf.set("hadoop.http.authentication.type", "kerberos");
      conf.set("hadoop.http.authentication.kerberos.principal", "*");
      conf.set("hadoop.http.authentication.kerberos.keytab", spnegoKeytab);
      conf.setBoolean("hadoop.http.authentication.simple.anonymous.allowed", false);
      conf.set("dfs.http.policy", "HTTP_ONLY");
      // a secure DataNode wants privileged ports or SASL with HTTPS; HBase's tests skip it
      conf.setBoolean("ignore.secure.ports.for.testing", true);
      // Permissions stay on: the superusers (walship) read and delete HBase's WALs as members
      // of HDFS's superuser group, which Hadoop's static group mapping makes them (they have no
      // Unix account here); dr.who keeps Hadoop's default of no groups
      StringBuilder groups = new StringBuilder("dr.who=;");
      for (String user : superusers) {
        if (!user.startsWith("@")) {
          groups.append(user).append("=supergroup;");
        }
      }
      conf.set("dfs.permissions.superusergroup", "supergroup");
      conf.set("hadoop.user.group.static.mapping.overrides", groups.toString());
    }
  }

  /** Logs the JVM in as the service principal (and HBase's ZooKeeper client); before starting. */
  void login(Configuration conf) throws IOException {
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(resolved(principal), keytab);
    ZKAuthentication.loginClient(conf, "hbase.zookeeper.client.keytab.file",
      "hbase.zookeeper.client.kerberos.principal", serviceHost);
  }

  private String resolved(String configured) {
    try {
      return SecurityUtil.getServerPrincipal(configured, serviceHost);
    } catch (IOException e) {
      throw new IllegalArgumentException("bad principal " + configured, e);
    }
  }

  private static String required(JsonObject o, String key) {
    if (!o.has(key) || o.get(key).isJsonNull()) {
      throw new IllegalArgumentException("--secure file: \"" + key + "\" is required");
    }
    return o.get(key).getAsString();
  }

  private static String optional(JsonObject o, String key, String fallback) {
    return o.has(key) && !o.get(key).isJsonNull() ? o.get(key).getAsString() : fallback;
  }
}
