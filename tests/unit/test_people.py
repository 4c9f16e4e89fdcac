"""Identity canonicalisation: one person per human across spellings and sources."""

import pytest

from jarvis_core.sources.people import (
    Identity,
    PersonDirectory,
    identities_of,
    normal_email,
    normal_name,
)


@pytest.mark.parametrize("raw, expected", [
    ("Dana Kim", "dana kim"), ("dana.kim", "dana kim"), ("Kim, Dana", "dana kim"),
    ("  DÁNA   Kim ", "dana kim"), ("dana_kim@lumen.dev", "dana kim"), ("", None), ("...", None),
])
def test_normal_name(raw, expected):
    assert normal_name(raw) == expected


def test_normal_email():
    assert normal_email(" <Dana.Kim@Lumen.DEV> ") == "dana.kim@lumen.dev"
    assert normal_email("not an email") is None
    assert normal_email(None) is None


def test_name_variants_with_one_email_are_one_person():
    directory = PersonDirectory([
        Identity("Dana Kim", "dana@lumen.dev"), Identity("dana.kim", "DANA@lumen.dev"),
        Identity("Kim, Dana", None), Identity("Dana Kim", "dana.kim@personal.example"),
    ])
    [person] = directory.persons()
    assert person.key == "person:dana.kim@personal.example"  # the smallest email, always
    assert person.name == "Dana Kim"
    assert person.emails == ("dana.kim@personal.example", "dana@lumen.dev")
    assert set(person.names) == {"Dana Kim", "dana.kim", "Kim, Dana"}


def test_different_people_stay_apart_and_lone_first_names_fold_nothing():
    directory = PersonDirectory([
        Identity("Dana Kim", "dana@lumen.dev"), Identity("Omar Haddad", "omar@lumen.dev"),
        Identity("Dana", "dana.r@elsewhere.example"), Identity("Dana", None),
    ])
    keys = [person.key for person in directory.persons()]
    assert keys == ["person:dana", "person:dana.r@elsewhere.example",
                    "person:dana@lumen.dev", "person:omar@lumen.dev"]


def test_aliases_join_identities_and_key_people_without_email():
    directory = PersonDirectory()
    login_only = directory.person(Identity(None, None, ("github:dkim",)))
    assert login_only.key == "person:github:dkim"
    noreply = directory.person(Identity("Dana Kim", "123+dkim@users.noreply.github.com"))
    assert noreply.aliases == ("github:dkim",)
    joined = directory.person(Identity("Dana Kim", "dana@lumen.dev"))
    assert joined.key == directory.person(Identity(None, None, ("github:dkim",))).key \
        == "person:dana@lumen.dev"  # a real address keys the person before a no-reply one
    assert directory.person(Identity(None, None, ())) is None


def test_keys_do_not_depend_on_order():
    identities = [Identity("Kim, Dana", None), Identity("dana.kim", "dana@lumen.dev"),
                  Identity("Dana Kim", "d.kim@lumen.dev"), Identity("Lee Park", "lee@lumen.dev")]
    forward = PersonDirectory(identities).persons()
    backward = PersonDirectory(reversed(identities)).persons()
    assert forward == backward
    assert [p.key for p in forward] == ["person:d.kim@lumen.dev", "person:lee@lumen.dev"]


def test_a_directory_seeded_with_other_sources_people_folds_their_logins():
    noreply = "41234+priyaraman@users.noreply.github.com"
    from_git = PersonDirectory([Identity("Priya Raman", "priya.raman@lumen.example"),
                                Identity("Priya Raman", noreply)])
    [priya] = from_git.persons()
    nodes = [{"emails": list(priya.emails), "names": list(priya.names),
              "aliases": list(priya.aliases)}]
    github = PersonDirectory(identities_of(nodes))
    assert github.person(Identity("priyaraman", None, ("github:priyaraman",))).key == \
        "person:priya.raman@lumen.example"
    assert PersonDirectory().person(Identity("priyaraman", None, ("github:priyaraman",))).key \
        == "person:github:priyaraman"  # unseeded, the login is all there is
