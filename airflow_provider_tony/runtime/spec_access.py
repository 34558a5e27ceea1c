"""Who may reach a running job, and with which credentials: YARN ACLs and Kerberos token refresh.

Why a module of its own: ``Acls`` (who besides the submitter may view the application or kill it)
and ``KerberosSpec`` (whether the AM is given the keytab to renew HDFS delegation tokens) are a
job's security settings; a review of what a job lets others see, or of where a keytab goes, starts
here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from airflow_provider_tony.runtime.model import Model, _check, _str_list, shown


@dataclass
class Acls(Model):
    """YARN application ACLs: who besides the submitter may view logs or kill the job."""

    view_users: list[str] = field(default_factory=list)
    """Users besides the submitter who may view the application and its logs."""
    modify_users: list[str] = field(default_factory=list)
    """Users besides the submitter who may kill the application."""

    def validate(self) -> None:
        for name in ("view_users", "modify_users"):
            users = _str_list(getattr(self, name), name, "['alice', 'bob']")
            for i, user in enumerate(users):
                # YARN ACL strings are "user1,user2 group1": commas and spaces are separators.
                _check(
                    user != "" and not re.search(r"[,\s]", user),
                    f"{name}[{i}]",
                    lambda: f"{shown(user)} is not a user name; give one user per list item, without commas or spaces",
                )
            setattr(self, name, users)


@dataclass
class KerberosSpec(Model):
    """What a job on a Kerberized cluster needs beyond the connection's login (``kerberos`` of a job).

    HDFS delegation tokens stop working at their maximum lifetime
    (``dfs.namenode.delegation.token.max-lifetime``, 7 days by default, often
    one day), however often YARN renews them; a job that must keep uploading
    checkpoints past that date needs fresh tokens, and only a keytab can get
    them without a person.
    """

    refresh_tokens: bool = False
    """Ship the connection's keytab to the application master's container only (never to task containers), so the AM
    obtains a fresh HDFS delegation token from it before the current one expires and hands it to the executors; for
    jobs that run longer than the cluster's token maximum lifetime. Needs the connection's ``principal`` and
    ``keytab``, and ``gssapi`` with ``requests-gssapi`` in the job's Python."""

    def validate(self) -> None:
        _check(
            isinstance(self.refresh_tokens, bool),
            "refresh_tokens",
            lambda: f"{shown(self.refresh_tokens)} is not true or false; give true or false",
        )
